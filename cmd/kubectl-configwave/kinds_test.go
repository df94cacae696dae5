package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/approval"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// The verbs on the two kinds whose revisions are not a Deployment's: a CronJob (its Jobs) and
// an Argo Rollout (its ReplicaSets, made by the real Argo Rollouts controller). Each with
// revisions through a change: history names both revisions and what changed, diff shows the
// line, pods shows the pods under their revision, undo to the first revision puts its
// template back; with approval manual, a change waits until approve.
func TestVerbsOnACronJobAndAnArgoRollout(t *testing.T) {
	client := adminClient(t)
	testcluster.StartArgoRollouts(t, cluster)
	dyn, err := dynamic.NewForConfig(cluster.Config())
	require.NoError(t, err)
	rollouts := schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

	for _, kind := range []struct {
		name, target string
		create       func(t *testing.T, ns string, annotations map[string]string)
		hash         func(t *testing.T, ns string) string // the template's inputs hash
	}{
		{"CronJob", "cronjob/nightly", func(t *testing.T, ns string, annotations map[string]string) {
			_, err := client.BatchV1().CronJobs(ns).Create(ctx(t), cronJob(annotations), metav1.CreateOptions{})
			require.NoError(t, err)
		}, func(t *testing.T, ns string) string { return cronJobHash(t, client, ns) }},
		{"Argo Rollout", "rollout/web", func(t *testing.T, ns string, annotations map[string]string) {
			_, err := dyn.Resource(rollouts).Namespace(ns).Create(ctx(t), argoRollout(ns, "web", annotations), metav1.CreateOptions{})
			require.NoError(t, err)
		}, func(t *testing.T, ns string) string {
			u, err := dyn.Resource(rollouts).Namespace(ns).Get(ctx(t), "web", metav1.GetOptions{})
			require.NoError(t, err)
			v, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", rollout.InputsHashAnnotation)
			return v
		}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			ns := testcluster.Namespace(t, client)
			createApp(t, client, ns, "v1")
			startWave(t, ns)
			kind.create(t, ns, map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true", revisions.OptInAnnotation: "true"})
			require.Eventually(t, func() bool { return revisions.IsRevision(kind.hash(t, ns)) }, eventually, tick, "wave turns revisions on")
			first := kind.hash(t, ns)
			var h historyView
			require.Eventually(t, func() bool {
				h = historyOfJSON(t, ns, kind.target)
				return len(h.Revisions) >= 1 && h.Revisions[len(h.Revisions)-1].InputsHash == first
			}, eventually, tick, "history shows the revision")
			v1 := h.Revisions[len(h.Revisions)-1]

			updateApp(t, client, ns, "v2")
			require.Eventually(t, func() bool { h := kind.hash(t, ns); return h != first && revisions.IsRevision(h) }, eventually, tick, "wave rolls the change")
			second := kind.hash(t, ns)
			if !assert.Eventually(t, func() bool {
				h = historyOfJSON(t, ns, kind.target)
				return len(h.Revisions) >= 2 && h.Revisions[len(h.Revisions)-1].InputsHash == second
			}, eventually, tick) {
				t.Fatalf("history does not show the change's revision %s: %s", second, run(t, "history", kind.target, "-n", ns, "-o", "json"))
			}
			v2 := h.Revisions[len(h.Revisions)-1]
			assert.Contains(t, v2.Cause, "configmap/app changed")
			assert.Contains(t, run(t, "diff", kind.target, "-n", ns), "-v1\n+v2\n", "the line that changed")
			var pods podsOut
			require.NoError(t, json.Unmarshal([]byte(run(t, "pods", kind.target, "-n", ns, "-o", "json")), &pods))
			assert.Equal(t, kind.target, pods.Workload)

			out := run(t, "undo", kind.target, "-n", ns, fmt.Sprintf("--to-revision=%d", v1.Revision))
			assert.Contains(t, out, fmt.Sprintf("rolled back to revision %d", v1.Revision))
			require.Eventually(t, func() bool { return kind.hash(t, ns) == first }, eventually, tick, "the first revision's template is back")
			out, err := kubectlConfigwave(t, cluster.Kubeconfig(), "approve", kind.target, "-n", ns)
			require.Error(t, err, out)
			assert.Contains(t, err.Error(), "waits for approval", "approve on this kind says there is nothing to approve")
		})
	}

	// Approval on a CronJob: the change waits for approve, then wave writes it.
	t.Run("CronJob approval", func(t *testing.T) {
		ns := testcluster.Namespace(t, client)
		createApp(t, client, ns, "v1")
		startWave(t, ns)
		_, err := client.BatchV1().CronJobs(ns).Create(ctx(t), cronJob(map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true", approval.Annotation: approval.Manual}), metav1.CreateOptions{})
		require.NoError(t, err)
		hash := func() string { return cronJobHash(t, client, ns) }
		require.Eventually(t, func() bool {
			cj, err := client.BatchV1().CronJobs(ns).Get(ctx(t), "nightly", metav1.GetOptions{})
			require.NoError(t, err)
			return cj.Annotations[rollout.InputsAnnotation] != ""
		}, eventually, tick, "wave records the config")
		before := hash()
		updateApp(t, client, ns, "v2")
		require.Eventually(t, func() bool { return historyOfJSON(t, ns, "cronjob/nightly").Pending != nil }, eventually, tick, "the change waits for approval")
		assert.Equal(t, before, hash(), "nothing written before approval")
		assert.Contains(t, run(t, "approve", "cronjob/nightly", "-n", ns), "is approved")
		require.Eventually(t, func() bool { return hash() != before }, eventually, tick, "the approved change is written")
	})
}

// cronJob is CronJob nightly, scheduled once a year, whose pods read the ConfigMap app
// through envFrom.
func cronJob(annotations map[string]string) *batchv1.CronJob {
	return &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Annotations: annotations},
		Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1",
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}}}}}}}}}
}

func cronJobHash(t *testing.T, client kubernetes.Interface, ns string) string {
	t.Helper()
	cj, err := client.BatchV1().CronJobs(ns).Get(ctx(t), "nightly", metav1.GetOptions{})
	require.NoError(t, err)
	return cj.Spec.JobTemplate.Spec.Template.Annotations[rollout.InputsHashAnnotation]
}

func createApp(t *testing.T, client kubernetes.Interface, ns, v string) {
	t.Helper()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"k": v}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func updateApp(t *testing.T, client kubernetes.Interface, ns, v string) {
	t.Helper()
	_, err := client.CoreV1().ConfigMaps(ns).Update(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"k": v}}, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func historyOfJSON(t *testing.T, ns, target string) historyView {
	t.Helper()
	var h historyView
	require.NoError(t, json.Unmarshal([]byte(run(t, "history", target, "-n", ns, "-o", "json")), &h))
	return h
}

// argoRollout is a Rollout of one replica, canary without steps, whose pods read the ConfigMap
// app through envFrom.
func argoRollout(ns, name string, annotations map[string]string) *unstructured.Unstructured {
	labels := map[string]any{"app": name}
	a := map[string]any{}
	for k, v := range annotations {
		a[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
		"metadata": map[string]any{"namespace": ns, "name": name, "annotations": a},
		"spec": map[string]any{
			"replicas": int64(1), "selector": map[string]any{"matchLabels": labels},
			"strategy": map[string]any{"canary": map[string]any{}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": "app", "image": "registry.invalid/app:1",
					"envFrom": []any{map[string]any{"configMapRef": map[string]any{"name": "app"}}},
				}}},
			},
		},
	}}
}
