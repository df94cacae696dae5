package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// A CronJob that opts in (Reloader's or Wave's annotation) gets one Job at once per config
// change, named and marked as Reloader and `kubectl create job --from` make it; creating it,
// or wave starting, starts none; a Job already there is left alone.
func TestCronJobStartsOneJobPerChange(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cfg", map[string]string{"a": "1"})
	cronJob := func(name string, annotations map[string]string) *batchv1.CronJob {
		cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
			Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *"}} // the scheduler is not what starts them here
		cj.Spec.JobTemplate.Spec.Template.Spec = corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "run", Image: "busybox",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("cfg")}}}}}}
		created, err := client.BatchV1().CronJobs(ns).Create(ctx(t), cj, metav1.CreateOptions{})
		require.NoError(t, err)
		return created
	}
	stakaterStyle := cronJob("nightly", map[string]string{podrefs.StakaterAuto: "true"})
	cronJob("hourly", map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"})
	cronJob("paused", map[string]string{podrefs.StakaterAuto: "true"})
	_, err := client.BatchV1().CronJobs(ns).Patch(ctx(t), "paused", types.MergePatchType, []byte(`{"spec":{"suspend":true}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	earlier, err := client.BatchV1().Jobs(ns).Create(ctx(t), &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "nightly-earlier",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(stakaterStyle, batchv1.SchemeGroupVersion.WithKind("CronJob"))}},
		Spec: stakaterStyle.Spec.JobTemplate.Spec}, metav1.CreateOptions{})
	require.NoError(t, err)

	p := startWave(t, ns)
	for _, name := range []string{"nightly", "hourly", "paused"} {
		require.Eventually(t, func() bool {
			cj, err := client.BatchV1().CronJobs(ns).Get(ctx(t), name, metav1.GetOptions{})
			return err == nil && cj.Annotations[rollout.InputsAnnotation] != ""
		}, eventually, tick, "wave records what %s's Jobs use", name)
	}
	settle(t, p)
	startedBy := func(cronJob string) []batchv1.Job {
		list, err := client.BatchV1().Jobs(ns).List(ctx(t), metav1.ListOptions{})
		require.NoError(t, err)
		var out []batchv1.Job
		for _, j := range list.Items {
			if strings.HasPrefix(j.Name, cronJob+"-") && j.Name != earlier.Name {
				out = append(out, j)
			}
		}
		return out
	}
	assert.Empty(t, startedBy("nightly"), "adoption starts nothing")

	for change := 1; change <= 2; change++ {
		patchCM(t, client, ns, "cfg", `{"data":{"a":"`+string(rune('1'+change))+`"}}`)
		require.Eventually(t, func() bool { return len(startedBy("nightly")) == change && len(startedBy("hourly")) == change }, eventually, tick)
		settle(t, p)
		assert.Len(t, startedBy("nightly"), change, "one Job per change")
		assert.Len(t, startedBy("hourly"), change)
		assert.Empty(t, startedBy("paused"), "a suspended CronJob starts no Job")
	}
	require.Eventually(t, func() bool { // the same message twice is one Event, counted twice
		n := int32(0)
		for _, e := range events(t, client, ns, "paused", "JobNotStarted") {
			assert.Contains(t, e.Message, "suspended")
			n += e.Count
		}
		return n == 2
	}, eventually, tick, "one JobNotStarted per change")
	cj, err := client.BatchV1().CronJobs(ns).Get(ctx(t), "paused", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, cj.Spec.JobTemplate.Spec.Template.Annotations[rollout.InputsHashAnnotation], "its template carries the change: the next run uses it")
	j := startedBy("nightly")[0]
	assert.Equal(t, "manual", j.Annotations["cronjob.kubernetes.io/instantiate"])
	assert.Equal(t, "nightly", metav1.GetControllerOf(&j).Name)
	again, err := client.BatchV1().Jobs(ns).Get(ctx(t), earlier.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, earlier.ResourceVersion, again.ResourceVersion, "a Job already there is left alone")
	assert.Empty(t, events(t, client, ns, "nightly", "ConfigRolledOut"), "nothing rolls of a CronJob, so nothing is reported as rolled out")
}
