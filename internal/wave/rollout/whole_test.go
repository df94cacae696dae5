package rollout

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/podrefs"
)

// The data of an object an opted-in workload uses is kept as the informer receives it, so the
// whole object Wave's hash needs comes with no GET; an object nobody uses stays digests only.
func TestWholeDataOnlyForUsedObjects(t *testing.T) {
	c, client := newTestController(t, false)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", Annotations: map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}}}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "used"}}}}}}
	require.NoError(t, c.Informers.workloads["Deployment"][0].GetIndexer().Add(d))
	gets := 0
	client.PrependReactor("get", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		gets++
		return false, nil, nil
	})

	digest := func(name, rv, value string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}, Data: map[string]string{"k": value}}
		require.NoError(t, client.Tracker().Add(cm))
		digested, err := c.Informers.digester.Transform(cm)
		require.NoError(t, err)
		require.NoError(t, c.Informers.configs[configref.ConfigMap][0].GetIndexer().Add(digested))
	}
	digest("used", "7", "secret-ish")
	digest("unused", "8", "other")
	assert.Equal(t, 1, c.Informers.whole.Len(), "only the used object is kept whole")

	obj, err := c.full.get(context.Background(), configref.Ref{Kind: configref.ConfigMap, Namespace: "ns", Name: "used"})
	require.NoError(t, err)
	assert.Equal(t, "secret-ish", obj.(*corev1.ConfigMap).Data["k"])
	assert.Zero(t, gets, "no read from the API on the hot path")

	obj, err = c.full.get(context.Background(), configref.Ref{Kind: configref.ConfigMap, Namespace: "ns", Name: "unused"})
	require.NoError(t, err)
	assert.Equal(t, "other", obj.(*corev1.ConfigMap).Data["k"])
	assert.Equal(t, 1, gets, "an object kept as digests only is read when needed")

	// A newer version that the cache has not seen yet is not taken for the cached one.
	c.Informers.whole.Offer(configref.ConfigMap, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "used", ResourceVersion: "9"}})
	_, ok := c.Informers.whole.Get(configref.Ref{Kind: configref.ConfigMap, Namespace: "ns", Name: "used"}, "7")
	assert.False(t, ok)
	c.Informers.whole.Forget(configref.Ref{Kind: configref.ConfigMap, Namespace: "ns", Name: "used"})
	assert.Zero(t, c.Informers.whole.Len())
}
