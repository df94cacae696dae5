package digeststore

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/slimcache"
)

func digest(t testing.TB, obj any) *confighash.Digested {
	t.Helper()
	d, err := confighash.Digester{KeepLabels: true}.Transform(obj)
	require.NoError(t, err)
	return d.(*confighash.Digested)
}

func configMap(ns, name, rv string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv}, Data: data}
}

func TestRecordsGiveBackWhatTheyKept(t *testing.T) {
	withMeta := configMap("ns", "meta", "12", map[string]string{"a": "1"})
	withMeta.Labels = map[string]string{"team": "a"}
	withMeta.Annotations = map[string]string{"reloader.stakater.com/match": "true", "dropped": "x"}
	for name, obj := range map[string]any{
		"one key":                   configMap("ns", "one", "4711", map[string]string{"a": "1"}),
		"no key":                    configMap("ns", "none", "5", nil),
		"several keys":              configMap("ns", "many", "6", map[string]string{"b": "2", "a": "1", "c": "3"}),
		"labels and annotations":    withMeta,
		"resourceVersion 0":         configMap("ns", "zero", "0", map[string]string{"a": "1"}),
		"resourceVersion not plain": configMap("ns", "opaque", "007", map[string]string{"a": "1"}),
		"resourceVersion text":      configMap("ns", "text", "abc.1", map[string]string{"a": "1"}),
		"resourceVersion empty":     configMap("ns", "empty", "", map[string]string{"a": "1"}),
		"resourceVersion too large": configMap("ns", "large", "18446744073709551616", map[string]string{"a": "1"}),
		"resourceVersion largest":   configMap("ns", "largest", "18446744073709551615", map[string]string{"a": "1"}),
		"secret": &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", ResourceVersion: "9"},
			Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}},
	} {
		t.Run(name, func(t *testing.T) {
			want := digest(t, obj)
			r := pack(want)
			assert.Equal(t, want, r.unpack(want.Namespace, want.Name))
		})
	}
}

func TestAnObjectOfOneKeyNeedsNoMore(t *testing.T) {
	r := pack(digest(t, configMap("ns", "one", "4711", map[string]string{"a": "1"})))
	assert.Nil(t, r.rest, "one key, a numeric resourceVersion and no metadata fit the record itself")
}

func TestStoreIsAnIndexerOfDigestedObjects(t *testing.T) {
	s := New()
	a1 := digest(t, configMap("ns1", "a", "1", map[string]string{"k": "1"}))
	b1 := digest(t, configMap("ns1", "b", "2", map[string]string{"k": "2"}))
	a2 := digest(t, configMap("ns2", "a", "3", map[string]string{"k": "3"}))
	for _, d := range []*confighash.Digested{a1, b1, a2} {
		require.NoError(t, s.Add(d))
	}
	assert.Equal(t, 3, s.Len())
	assert.ElementsMatch(t, []string{"ns1/a", "ns1/b", "ns2/a"}, s.ListKeys())
	assert.ElementsMatch(t, []any{a1, b1, a2}, s.List())

	got, ok, err := s.GetByKey("ns2/a")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, a2, got)
	got, ok, err = s.Get(&confighash.Digested{Identity: slimcache.Identity{Namespace: "ns1", Name: "b"}})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, b1, got)
	got.(*confighash.Digested).Keys[0].Key = "changed"
	again, _, _ := s.GetByKey("ns1/b")
	assert.Equal(t, b1, again, "a read is a copy: changing it leaves the store as it was")
	_, ok, err = s.GetByKey("ns3/a")
	assert.NoError(t, err)
	assert.False(t, ok)

	keys, err := s.IndexKeys(cache.NamespaceIndex, "ns1")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"ns1/a", "ns1/b"}, keys)
	objs, err := s.ByIndex(cache.NamespaceIndex, "ns2")
	require.NoError(t, err)
	assert.Equal(t, []any{a2}, objs)
	objs, err = s.Index(cache.NamespaceIndex, a1)
	require.NoError(t, err)
	assert.Len(t, objs, 2)
	assert.ElementsMatch(t, []string{"ns1", "ns2"}, s.ListIndexFuncValues(cache.NamespaceIndex))
	assert.ElementsMatch(t, []string{"a", "b"}, s.Names("ns1"))
	_, err = s.IndexKeys("by-label", "x")
	assert.ErrorContains(t, err, `no index "by-label"`)
	assert.Error(t, s.AddIndexers(cache.Indexers{"by-label": cache.MetaNamespaceIndexFunc}))
	assert.NoError(t, s.AddIndexers(cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}))

	a1v2 := digest(t, configMap("ns1", "a", "10", map[string]string{"k": "new", "l": "more"}))
	require.NoError(t, s.Update(a1v2))
	got, _, _ = s.GetByKey("ns1/a")
	assert.Equal(t, a1v2, got)
	assert.Equal(t, 3, s.Len(), "an update replaces")

	require.NoError(t, s.Delete(cache.DeletedFinalStateUnknown{Key: "ns2/a", Obj: a2}), "a tombstone deletes")
	require.NoError(t, s.Delete(a2), "deleting what is gone is no error")
	assert.Equal(t, []string{"ns1"}, s.ListIndexFuncValues(cache.NamespaceIndex), "an emptied namespace goes")
	assert.Equal(t, 2, s.Len())

	require.NoError(t, s.Replace([]any{a2}, "20"))
	assert.Equal(t, []string{"ns2/a"}, s.ListKeys())
	assert.Equal(t, 1, s.Len())
}

func TestStoreRefusesWhatIsNotDigested(t *testing.T) {
	s := New()
	cm := configMap("ns", "raw", "1", nil)
	assert.ErrorContains(t, s.Add(cm), "*v1.ConfigMap is not a digested ConfigMap or Secret")
	assert.Error(t, s.Delete(cm))
	_, _, err := s.Get(cm)
	assert.Error(t, err)
	assert.Error(t, s.Replace([]any{cm}, "1"))
	_, _, err = s.GetByKey("a/b/c")
	assert.Error(t, err)
}

func TestRepackKeepsEveryObjectAndLaterChanges(t *testing.T) {
	s := New()
	var want []any
	for i := range 100 {
		d := digest(t, configMap(fmt.Sprintf("ns%d", i%3), fmt.Sprintf("cm-%d", i), fmt.Sprint(100+i), map[string]string{"k": fmt.Sprint(i)}))
		require.NoError(t, s.Add(d))
		want = append(want, d)
	}
	s.Repack()
	assert.ElementsMatch(t, want, s.List())
	assert.Equal(t, 100, s.Len())

	changed := digest(t, configMap("ns1", "cm-1", "500", map[string]string{"k": "new"}))
	require.NoError(t, s.Update(changed))
	added := digest(t, configMap("ns1", "cm-new", "501", map[string]string{"k": "x"}))
	require.NoError(t, s.Add(added))
	require.NoError(t, s.Delete(want[2]))
	got, _, _ := s.GetByKey("ns1/cm-1")
	assert.Equal(t, changed, got)
	got, _, _ = s.GetByKey("ns1/cm-new")
	assert.Equal(t, added, got)
	_, ok, _ := s.GetByKey("ns2/cm-2")
	assert.False(t, ok)
	assert.Equal(t, 100, s.Len())
	for _, d := range want[3:] {
		if d.(*confighash.Digested).Name == "cm-1" {
			continue
		}
		got, ok, _ := s.Get(d)
		require.True(t, ok)
		assert.Equal(t, d, got)
	}
}

// BenchmarkBytesPerObject reports the heap each of 100,000 objects of one key costs, in this
// store after Repack and in client-go's store of the same *Digested objects.
func BenchmarkBytesPerObject(b *testing.B) {
	const n = 100_000
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	fill := func(s cache.Store) {
		for i := range n {
			_ = s.Add(digest(b, configMap("bench", fmt.Sprintf("cm-%d", i), fmt.Sprint(1_000_000+i), map[string]string{"a": fmt.Sprint(i)})))
		}
	}
	for b.Loop() {
		before := heap()
		s := New()
		fill(s)
		s.Repack()
		ours := heap()
		c := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{})
		fill(c)
		theirs := heap()
		b.ReportMetric(float64(ours-before)/n, "B/object")
		b.ReportMetric(float64(theirs-ours)/n, "client-go-B/object")
		runtime.KeepAlive(s)
		runtime.KeepAlive(c)
	}
}

// FuzzResourceVersion: whatever resourceVersion the API sends, the store gives it back.
func FuzzResourceVersion(f *testing.F) {
	for _, rv := range []string{"", "0", "1", "007", "-1", "+1", "18446744073709551615", "18446744073709551616", "abc"} {
		f.Add(rv)
	}
	f.Fuzz(func(t *testing.T, rv string) {
		want := &confighash.Digested{Identity: slimcache.Identity{Namespace: "ns", Name: "n", ResourceVersion: rv}, Keys: []confighash.KeyDigest{{Key: "a"}}}
		r := pack(want)
		assert.Equal(t, want, r.unpack("ns", "n"))
	})
}
