package rollout

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/workload"

	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

func newTestController(t *testing.T, allowCross bool, objs ...*corev1.ConfigMap) (*Controller, *fake.Clientset) {
	t.Helper()
	client := fake.NewSimpleClientset()
	for _, o := range objs {
		require.NoError(t, client.Tracker().Add(o))
	}
	inf := NewInformers(workload.Clients{Kube: waveclienttest.Wrap(client)}, workload.Builtin(), []string{"ns"}, labels.Everything(), time.Minute, confighash.Digester{})
	c, err := NewController(Config{Client: waveclienttest.Wrap(client), Informers: inf, Recorder: record.NewFakeRecorder(10),
		Metrics: testMetrics(), AllowCrossNamespaceRefs: allowCross})
	require.NoError(t, err)
	return c, client
}

// The reverse index is an informer indexer: a ConfigMap's users are found from the workload
// cache alone, objects that do not exist yet and the workload's extra-* entries included.
func TestIndexFindsUsersFromTheCache(t *testing.T) {
	for _, allowCross := range []bool{false, true} {
		c, _ := newTestController(t, allowCross)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", Annotations: map[string]string{
			podrefs.UpdateOnConfigChangeAnnotation: "true", podrefs.ExtraConfigMapsAnnotation: "later,other/x"}}}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}}}
		notOptedIn := d.DeepCopy()
		notOptedIn.Name, notOptedIn.Annotations = "plain", nil
		indexer := c.Informers.workloads["Deployment"][0].GetIndexer()
		require.NoError(t, indexer.Add(d))
		require.NoError(t, indexer.Add(notOptedIn))

		users := func(ref string) int {
			objs, err := indexer.ByIndex(byConfig, ref)
			require.NoError(t, err)
			return len(objs)
		}
		assert.Equal(t, 1, users("configmap ns/cm"))
		assert.Equal(t, 1, users("configmap ns/later"), "an object that does not exist yet")
		assert.Equal(t, map[bool]int{false: 0, true: 1}[allowCross], users("configmap other/x"), "another namespace only when allowed")
		assert.EqualValues(t, 1, c.Tracked(), "only opted-in workloads are tracked")

		require.NoError(t, indexer.Delete(d))
		assert.Zero(t, users("configmap ns/cm"), "a deleted workload leaves nothing behind")
		assert.Zero(t, c.Tracked())
	}
}

// A whole object whose resourceVersion moved on since the cache is used when its content is
// the same (a metadata-only write, or a writer that rewrites the same data): otherwise a
// busy ConfigMap would be retried forever. Other content means the cache is behind.
func TestFullReadComparesContentNotVersion(t *testing.T) {
	current := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", ResourceVersion: "9"}, Data: map[string]string{"k": "v"}}
	c, client := newTestController(t, false, current)
	cached := current.DeepCopy()
	cached.ResourceVersion = "8" // the cache saw the version before
	digested, err := c.Informers.digester.Transform(cached)
	require.NoError(t, err)
	require.NoError(t, c.Informers.configs[configref.ConfigMap][0].GetIndexer().Add(digested))
	ref := configref.Ref{Kind: configref.ConfigMap, Namespace: "ns", Name: "cm"}

	obj, err := c.full.get(context.Background(), ref)
	require.NoError(t, err, "same content at a newer version is used")
	assert.Equal(t, "v", obj.(*corev1.ConfigMap).Data["k"])

	changed := current.DeepCopy()
	changed.ResourceVersion, changed.Data["k"] = "10", "new"
	require.NoError(t, client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("configmaps"), changed, "ns"))
	c.full.entries = map[configref.Ref]fullEntry{}
	_, err = c.full.get(context.Background(), ref)
	assert.ErrorIs(t, err, errStale, "other content: the cache is behind")
}

// Reloader's regular-expression lists read the names of a namespace's config objects: from
// the namespace index when the informers cover every namespace, from the keys when they
// cover one (and keep no index).
func TestConfigNamesOverOneNamespaceAndEvery(t *testing.T) {
	for _, tc := range []struct {
		name       string
		namespaces []string
	}{{"one namespace", []string{"ns"}}, {"every namespace", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			inf := NewInformers(workload.Clients{Kube: waveclienttest.Wrap(fake.NewSimpleClientset())}, workload.Builtin(), tc.namespaces, labels.Everything(), time.Minute, confighash.Digester{})
			store := inf.configs[configref.ConfigMap][0].GetIndexer()
			for _, o := range []metav1.ObjectMeta{{Namespace: "ns", Name: "b"}, {Namespace: "ns", Name: "a"}, {Namespace: "nsx", Name: "c"}} {
				digested, err := confighash.Digest(&corev1.ConfigMap{ObjectMeta: o})
				require.NoError(t, err)
				require.NoError(t, store.Add(digested))
			}
			assert.ElementsMatch(t, []string{"a", "b"}, inf.configNames(configref.ConfigMap, "ns"))
		})
	}
}

// --namespace-selector is read when a workload is looked at, not when it is indexed: a
// namespace labelled into the selection after its workloads were indexed (a relabel, or the
// namespace informer a moment behind at start) still has their config changes reach them,
// without waiting for the resync.
func TestIndexDoesNotDependOnNamespaceLabels(t *testing.T) {
	client := fake.NewSimpleClientset()
	inf := NewInformers(workload.Clients{Kube: waveclienttest.Wrap(client)}, workload.Builtin(), nil, labels.Everything(), time.Minute, confighash.Digester{})
	inf.WatchNamespaces(waveclienttest.Wrap(client))
	sel, err := labels.Parse("team=a")
	require.NoError(t, err)
	c, err := NewController(Config{Client: waveclienttest.Wrap(client), Informers: inf, Recorder: record.NewFakeRecorder(10),
		Metrics:  testMetrics(),
		Reloader: StakaterOptions{NamespaceSelector: sel}})
	require.NoError(t, err)
	defer c.queue.ShutDown()
	nsStore := inf.namespaces.GetIndexer()
	require.NoError(t, nsStore.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"team": "b"}}}))
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", Annotations: map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}}}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}}}
	require.NoError(t, inf.workloads["Deployment"][0].GetIndexer().Add(d))
	assert.Zero(t, c.Tracked(), "not in a selected namespace")

	require.NoError(t, nsStore.Update(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"team": "a"}}}))
	assert.EqualValues(t, 1, c.Tracked(), "counted once its namespace is selected")
	c.enqueueUsers(configref.ConfigMap, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}})
	require.Equal(t, 1, c.queue.Len(), "the change reaches the workload")
	key, _ := c.queue.Get()
	assert.Equal(t, "Deployment/ns/app", key)
	c.queue.Done(key)
}

// The index functions share one decode of a cache entry (indexMemo), for an entry of a kind
// cached slim (workload.Cached) and for an object kept whole alike. An update makes a new
// entry, so the memo never gives an entry's values to another, and the index follows the
// workload's changes as it did with a decode per call.
func TestIndexFollowsUpdatesOfCachedEntries(t *testing.T) {
	usingCM := func(name string) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", ResourceVersion: name,
			Annotations: map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}}}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}}}
		return d
	}
	for shape, entryOf := range map[string]func(name string) any{
		"slim":  func(name string) any { return workload.Compact(usingCM(name)) },
		"whole": func(name string) any { return usingCM(name) },
	} {
		t.Run(shape, func(t *testing.T) {
			c, _ := newTestController(t, false)
			indexer := c.Informers.workloads["Deployment"][0].GetIndexer()
			users := func(ref string) int {
				objs, err := indexer.ByIndex(byConfig, ref)
				require.NoError(t, err)
				return len(objs)
			}
			first := entryOf("a")
			if shape == "slim" {
				require.IsType(t, &workload.Cached{}, first)
			}
			require.NoError(t, indexer.Add(first))
			assert.Equal(t, 1, users("configmap ns/a"))

			// More updates than the memo holds, each to another ConfigMap, then back to the first.
			for _, name := range []string{"b", "c", "d", "e", "f", "a"} {
				require.NoError(t, indexer.Update(entryOf(name)))
				assert.Equal(t, 1, users("configmap ns/"+name), name)
				assert.Equal(t, 1, len(indexer.List()))
				for _, other := range []string{"a", "b", "c", "d", "e", "f"} {
					if other != name {
						assert.Zero(t, users("configmap ns/"+other), "after the update to %s, nothing left of %s", name, other)
					}
				}
			}
			optedIn, err := indexer.ByIndex(byOptIn, "true")
			require.NoError(t, err)
			assert.Len(t, optedIn, 1)

			// Values from the memo are those a fresh decode gives.
			entry := entryOf("z")
			fresh := c.indexValues(entry)
			assert.Equal(t, []string{"configmap ns/z"}, fresh.config)
			assert.Equal(t, fresh, c.indexValuesOf(entry))
			assert.Equal(t, fresh, c.indexValuesOf(entry), "the second time from the memo")
		})
	}
}

func TestIndexMemoKeepsTheLastEntries(t *testing.T) {
	var m indexMemo
	entries := make([]*workload.Cached, 6)
	for i := range entries {
		entries[i] = &workload.Cached{}
		m.put(entries[i], indexValues{pattern: []string{string(rune('a' + i))}})
	}
	for i, e := range entries {
		v, ok := m.get(e)
		if i < len(entries)-len(m.slots) {
			assert.False(t, ok, "entry %d was pushed out", i)
			continue
		}
		require.True(t, ok, "entry %d", i)
		assert.Equal(t, []string{string(rune('a' + i))}, v.pattern)
	}
}
