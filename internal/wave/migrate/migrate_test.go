package migrate

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/configwave/configwave/internal/wave/podrefs"

	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

// Only the owner references Wave wrote go; one that a person or a tool set to the same
// Deployment stays, and so do the others.
func TestRemovesOnlyWavesOwnerReferences(t *testing.T) {
	yes, no := true, false
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", UID: "d1",
		Annotations: map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}}}
	waves := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "app", UID: "d1", BlockOwnerDeletion: &yes, Controller: &no}
	users := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "app", UID: "d1"} // set by hand, for the collector
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "parent", UID: "c9"}
	cm := func(name string, owners ...metav1.OwnerReference) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, OwnerReferences: owners}}
	}
	client := fake.NewSimpleClientset(d, cm("wave", waves, other), cm("mine", users), cm("both", waves, users),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", OwnerReferences: []metav1.OwnerReference{waves}}})

	rep, err := FromWaveV05(context.Background(), waveclienttest.Wrap(client), []string{"ns"}, false)
	require.NoError(t, err)
	assert.Equal(t, 3, rep.OwnerReferencesRemoved, "wave, both and the Secret")
	for name, want := range map[string][]metav1.OwnerReference{"wave": {other}, "mine": {users}, "both": {users}} {
		got, err := client.CoreV1().ConfigMaps("ns").Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, want, got.OwnerReferences, name)
	}
	s, err := client.CoreV1().Secrets("ns").Get(context.Background(), "s", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, s.OwnerReferences)
}

// ConfigMaps are fixed page by page as they are listed: the first page's objects are updated
// before the second page is asked for, so a namespace is never held whole.
func TestFixesConfigPageByPage(t *testing.T) {
	yes, no := true, false
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", UID: "d1",
		Annotations: map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}}}
	waves := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "app", UID: "d1", BlockOwnerDeletion: &yes, Controller: &no}
	objs := []runtime.Object{d}
	var names []string
	for i := range 2*configListPage + 1 {
		names = append(names, fmt.Sprintf("cm-%03d", i))
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: names[i], OwnerReferences: []metav1.OwnerReference{waves}}})
	}
	client := fake.NewSimpleClientset(objs...)
	var log []string // "list N" and "update NAME", in order
	client.PrependReactor("list", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		opts := a.(k8stesting.ListActionImpl).ListOptions
		require.EqualValues(t, configListPage, opts.Limit)
		start := 0
		if opts.Continue != "" {
			_, _ = fmt.Sscan(opts.Continue, &start)
		}
		end := min(start+configListPage, len(names))
		page := &corev1.ConfigMapList{}
		for _, n := range names[start:end] {
			cm, err := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("configmaps"), "ns", n)
			require.NoError(t, err)
			page.Items = append(page.Items, *cm.(*corev1.ConfigMap))
		}
		if end < len(names) {
			page.Continue = fmt.Sprint(end)
		}
		log = append(log, fmt.Sprintf("list %d", start))
		return true, page, nil
	})
	client.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		log = append(log, "update "+a.(k8stesting.UpdateAction).GetObject().(metav1.Object).GetName())
		return false, nil, nil
	})

	rep, err := FromWaveV05(context.Background(), waveclienttest.Wrap(client), []string{"ns"}, false)
	require.NoError(t, err)
	assert.Equal(t, len(names), rep.OwnerReferencesRemoved)
	require.Len(t, log, len(names)+3)
	assert.Equal(t, "list 0", log[0])
	assert.Equal(t, "update cm-099", log[configListPage])
	assert.Equal(t, fmt.Sprintf("list %d", configListPage), log[configListPage+1], "the second page is read after the first is fixed")
}
