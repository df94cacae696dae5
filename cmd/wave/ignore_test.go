package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// configwave.io/ignore, and Reloader's ignore, on a ConfigMap or Secret take it out of every
// record and hash: changing it rolls nothing, for a workload in either dialect; ignoring an
// object that was followed rolls nothing either, and its later changes are not seen.
func TestIgnoredConfigRollsNothing(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "app", map[string]string{"a": "1"})
	createCM(t, client, ns, "noisy", map[string]string{"n": "1"})
	createSecret(t, client, ns, "tok", map[string]string{"t": "1"})
	patchCM(t, client, ns, "noisy", `{"metadata":{"annotations":{"`+podrefs.IgnoreAnnotation+`":"true"}}}`)
	patchSecret(t, client, ns, "tok", `{"metadata":{"annotations":{"`+podrefs.StakaterIgnore+`":"true"}}}`)
	uses := []func(*corev1.PodSpec){withEnvFrom("app"), withEnvFrom("noisy"), func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = append(s.Containers[0].EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("tok")}})
	}}
	createDeployment(t, client, deployment(ns, "wave", uses...))
	createDeployment(t, client, stakaterDeployment(ns, "stakater", map[string]string{podrefs.StakaterAuto: "true"}, uses...))
	p := startWave(t, ns, "--coalesce=0")
	names := []string{"wave", "stakater"}
	records := map[string]string{}
	for _, name := range names {
		records[name] = waitRecorded(t, client, ns, name).Annotations[rollout.InputsAnnotation]
		assert.Contains(t, records[name], "configmap/app")
		assert.NotContains(t, records[name], "noisy", "%s: ignored, so not recorded", name)
		assert.NotContains(t, records[name], "tok", "%s: ignored by Reloader's annotation, so not recorded", name)
	}
	settle(t, p)

	patchCM(t, client, ns, "noisy", `{"data":{"n":"2"}}`)
	patchSecret(t, client, ns, "tok", `{"stringData":{"t":"2"}}`)
	settle(t, p)
	for _, name := range names {
		d := getDeployment(t, client, ns, name)
		assert.Equal(t, records[name], d.Annotations[rollout.InputsAnnotation], "%s: nothing written", name)
		assert.Len(t, replicaSets(t, client, ns, name), 1, "%s: an ignored object's change rolls nothing", name)
	}

	// Ignoring an object that was followed rolls nothing: it only leaves the record.
	patchCM(t, client, ns, "app", `{"metadata":{"annotations":{"`+podrefs.IgnoreAnnotation+`":"true"}}}`)
	for _, name := range names {
		require.Eventually(t, func() bool {
			return !strings.Contains(getDeployment(t, client, ns, name).Annotations[rollout.InputsAnnotation], "configmap/app")
		}, eventually, tick, "%s: app leaves the record", name)
	}
	patchCM(t, client, ns, "app", `{"data":{"a":"2"}}`)
	settle(t, p)
	for _, name := range names {
		assert.Len(t, replicaSets(t, client, ns, name), 1, "%s: still one ReplicaSet", name)
	}
	assert.Zero(t, p.Metric(`configwave_wave_reconciles_total{result="rolled"}`))
}
