package main

import (
	"time"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// Stakater Reloader's --namespace-selector and --resource-label-selector, in its syntax: only
// workloads in a namespace with matching labels roll, and only on a change of a ConfigMap
// with matching labels; labelling a namespace later brings its workloads in.
func TestStakaterSelectors(t *testing.T) {
	client := adminClient(t)
	in, out := testcluster.Namespace(t, client), testcluster.Namespace(t, client)
	_, err := client.CoreV1().Namespaces().Patch(ctx(t), in, types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	for _, ns := range []string{in, out} {
		_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "selected", Labels: map[string]string{"reloader": "enabled"}},
			Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		createCM(t, client, ns, "other", map[string]string{"a": "1"})
		createDeployment(t, client, stakaterDeployment(ns, "app", map[string]string{podrefs.StakaterAuto: "true"}, withEnvFrom("selected"), withEnvFrom("other")))
	}
	p := startWave(t, in+","+out, "--namespace-selector=team:a", "--resource-label-selector=reloader:enabled")
	before := inputsHash(waitRecorded(t, client, in, "app"))
	settle(t, p)
	assert.NotContains(t, getDeployment(t, client, out, "app").Annotations, rollout.InputsAnnotation, "a namespace without the labels is left alone")

	patchCM(t, client, in, "other", `{"data":{"a":"2"}}`)
	settle(t, p)
	assert.Equal(t, before, inputsHash(getDeployment(t, client, in, "app")), "a ConfigMap without the labels rolls nothing")
	patchCM(t, client, in, "selected", `{"data":{"a":"2"}}`)
	waitTemplateHashChange(t, client, in, "app", before)

	_, err = client.CoreV1().Namespaces().Patch(ctx(t), out, types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	waitRecorded(t, client, out, "app") // labelled: its workloads are looked at
	settle(t, p)

	// A workload cached while its namespace was not selected, whose record is current (so
	// nothing writes it when the namespace is labelled): its config changes still reach it at
	// once, not at the resync.
	p.Stop(15 * time.Second)
	_, err = client.CoreV1().Namespaces().Patch(ctx(t), out, types.MergePatchType, []byte(`{"metadata":{"labels":null}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	p = startWave(t, in+","+out, "--namespace-selector=team:a", "--resource-label-selector=reloader:enabled")
	settle(t, p)
	_, err = client.CoreV1().Namespaces().Patch(ctx(t), out, types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	settle(t, p)
	beforeOut := inputsHash(getDeployment(t, client, out, "app"))
	patchCM(t, client, out, "selected", `{"data":{"a":"2"}}`)
	waitTemplateHashChange(t, client, out, "app", beforeOut)
}
