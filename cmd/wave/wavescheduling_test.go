package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
)

// Switching from Wave 0.7 or later while Wave had disabled a workload's scheduling (its config
// was missing): once the config exists, wave restores the scheduler, and the pods run; while
// it is missing, the workload stays as Wave left it.
func TestSchedulingDisabledByWaveIsRestored(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	disabled := func(name, cm string) {
		d := deployment(ns, name, withEnvKey(cm, "a"))
		d.Annotations[podrefs.SchedulingDisabledAnnotation] = "" // the default scheduler, as Wave records it
		d.Spec.Template.Spec.SchedulerName = "invalid"
		createDeployment(t, client, d)
	}
	disabled("app", "cm")
	disabled("waiting", "not-yet")
	p := startWave(t, ns)
	require.Eventually(t, func() bool {
		d := getDeployment(t, client, ns, "app")
		_, still := d.Annotations[podrefs.SchedulingDisabledAnnotation]
		return !still && d.Spec.Template.Spec.SchedulerName == "default-scheduler"
	}, eventually, tick, "the scheduler Wave disabled is restored")
	require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, "app", eventually), "and its pods run")
	require.Eventually(t, func() bool { return len(events(t, client, ns, "app", "SchedulingRestored")) > 0 }, eventually, tick)
	settle(t, p)
	w := getDeployment(t, client, ns, "waiting")
	assert.Equal(t, "invalid", w.Spec.Template.Spec.SchedulerName, "config still missing: left as Wave left it")
	assert.Contains(t, w.Annotations, podrefs.SchedulingDisabledAnnotation)

	createCM(t, client, ns, "not-yet", map[string]string{"a": "1"})
	require.Eventually(t, func() bool {
		return getDeployment(t, client, ns, "waiting").Spec.Template.Spec.SchedulerName == "default-scheduler"
	}, eventually, tick)
}
