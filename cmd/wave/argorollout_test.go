package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rollout"
)

var rolloutsResource = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

// Argo Rollouts, with the real Argo Rollouts controller beside kube-controller-manager: a
// ConfigMap change rolls a Rollout that speaks Wave's annotation and one that speaks Stakater
// Reloader's, each through a new ReplicaSet that the Argo controller makes, and wave reports
// each rollout done. A Rollout that opted in to nothing is never written.
func TestArgoRollouts(t *testing.T) {
	client := adminClient(t)
	testcluster.StartArgoRollouts(t, cluster)
	dyn, err := dynamic.NewForConfig(cluster.Config())
	require.NoError(t, err)
	ns := testcluster.Namespace(t, client)
	rollouts := dyn.Resource(rolloutsResource).Namespace(ns)
	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	for name, annotations := range map[string]map[string]string{
		"wave":     {podrefs.UpdateOnConfigChangeAnnotation: "true"},
		"stakater": {podrefs.StakaterAuto: "true"},
		"restart":  {podrefs.StakaterAuto: "true", podrefs.StakaterRolloutStrategy: "restart"},
		"neither":  nil,
	} {
		_, err := rollouts.Create(ctx(t), argoRollout(ns, name, annotations), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	p := startWave(t, ns)
	get := func(name string) *unstructured.Unstructured {
		u, err := rollouts.Get(ctx(t), name, metav1.GetOptions{})
		require.NoError(t, err)
		return u
	}
	templateHash := func(name string) string {
		v, _, _ := unstructured.NestedString(get(name).Object, "spec", "template", "metadata", "annotations", rollout.InputsHashAnnotation)
		return v
	}
	healthy := func(name string) bool {
		u := get(name)
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		observed, _, _ := unstructured.NestedString(u.Object, "status", "observedGeneration")
		return phase == "Healthy" && observed == fmt.Sprint(u.GetGeneration())
	}
	names := []string{"wave", "stakater"}
	before := map[string]string{}
	for _, name := range append(names, "restart") {
		require.Eventually(t, func() bool { return get(name).GetAnnotations()[rollout.InputsAnnotation] != "" }, eventually, tick, "%s recorded", name)
		require.Eventually(t, func() bool { return healthy(name) }, eventually, tick, "%s: the Argo controller brought it up", name)
		before[name] = templateHash(name)
		assert.Len(t, rolloutReplicaSets(t, ns, name), 1, "%s: creating it rolled nothing more", name)
	}
	settle(t, p)
	neither := get("neither")

	patchCM(t, client, ns, "cm", `{"data":{"a":"2"}}`)
	for _, name := range names {
		require.Eventually(t, func() bool { return templateHash(name) != before[name] }, eventually, tick, "%s: template rolled", name)
		require.Eventually(t, func() bool { return healthy(name) && len(rolloutReplicaSets(t, ns, name)) == 2 }, eventually, tick,
			"%s: the Argo controller made a new ReplicaSet and finished the rollout", name)
		require.Eventually(t, func() bool { return len(events(t, client, ns, name, "ConfigRolledOut")) > 0 }, eventually, tick, "%s: wave followed it to the end", name)
	}
	// Reloader's rollout-strategy: restart: spec.restartAt, and the Argo controller restarts
	// the pods in place: the template stays, no new ReplicaSet.
	restartAt := func() string {
		v, _, _ := unstructured.NestedString(get("restart").Object, "spec", "restartAt")
		return v
	}
	require.Eventually(t, func() bool { return restartAt() != "" }, eventually, tick, "spec.restartAt set")
	require.Eventually(t, func() bool {
		v, _, _ := unstructured.NestedString(get("restart").Object, "status", "restartedAt")
		return v != "" && healthy("restart")
	}, eventually, tick, "the Argo controller restarted the pods and recorded status.restartedAt")
	assert.Equal(t, before["restart"], templateHash("restart"), "the template is left as it is")
	assert.Len(t, rolloutReplicaSets(t, ns, "restart"), 1, "a restart, not a new ReplicaSet")
	assert.Contains(t, get("restart").GetAnnotations()[rollout.InputsAnnotation], "configmap/cm", "the record says what the restarted pods run")
	settle(t, p)
	for _, name := range names {
		assert.Len(t, rolloutReplicaSets(t, ns, name), 2, "%s rolled once", name)
	}

	assert.Equal(t, neither.GetResourceVersion(), get("neither").GetResourceVersion(), "a Rollout that did not opt in is never written")
	require.Eventually(t, func() bool { return p.Metric(`configwave_wave_rollouts_total{result="succeeded"}`) == 3 }, eventually, tick,
		"the two rollouts and the restart, each followed to the end")

	first := restartAt()
	patchCM(t, client, ns, "cm", `{"data":{"a":"3"}}`)
	require.Eventually(t, func() bool { return restartAt() != first }, eventually, tick, "the next change restarts them again")
	assert.Len(t, rolloutReplicaSets(t, ns, "restart"), 1)
}

func argoRollout(ns, name string, annotations map[string]string) *unstructured.Unstructured {
	labels := map[string]any{"app": name}
	meta := map[string]any{"namespace": ns, "name": name}
	if annotations != nil {
		a := map[string]any{}
		for k, v := range annotations {
			a[k] = v
		}
		meta["annotations"] = a
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Rollout",
		"metadata":   meta,
		"spec": map[string]any{
			"replicas": int64(1),
			"selector": map[string]any{"matchLabels": labels},
			"strategy": map[string]any{"canary": map[string]any{}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": "app", "image": "registry.invalid/app:1",
					"envFrom": []any{map[string]any{"configMapRef": map[string]any{"name": "cm"}}},
				}}},
			},
		},
	}}
}

// rolloutReplicaSets lists the ReplicaSets the Argo controller made for a Rollout.
func rolloutReplicaSets(t *testing.T, ns, name string) []string {
	t.Helper()
	list, err := adminClient(t).AppsV1().ReplicaSets(ns).List(ctx(t), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, rs := range list.Items {
		for _, o := range rs.OwnerReferences {
			if o.Kind == "Rollout" && o.Name == name {
				out = append(out, rs.Name)
			}
		}
	}
	return out
}
