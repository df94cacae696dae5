package compactindex

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// obj is an object whose index values are in its labels: "uses" holds a list of values.
func obj(ns, name, rv string, uses ...string) *metav1.ObjectMeta {
	m := &metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv, Labels: map[string]string{}}
	for i, u := range uses {
		m.Labels[fmt.Sprint("use", i)] = u
	}
	return m
}

func usesOf(o any) ([]string, error) {
	m, ok := o.(*metav1.ObjectMeta)
	if !ok {
		return nil, fmt.Errorf("not an object: %T", o)
	}
	var out []string
	for i := range len(m.Labels) {
		out = append(out, m.Labels[fmt.Sprint("use", i)])
	}
	return out, nil
}

func optedIn(o any) ([]string, error) {
	if m := o.(*metav1.ObjectMeta); m.Annotations["opt"] == "in" {
		return []string{"true"}, nil
	}
	return nil, nil
}

func indexers() cache.Indexers {
	return cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, "uses": usesOf, "optIn": optedIn}
}

// sameAs asserts that ours answers every question as client-go's store does.
func sameAs(t *testing.T, want, got cache.Indexer, values []string, step string) {
	t.Helper()
	assert.ElementsMatch(t, want.ListKeys(), got.ListKeys(), step)
	assert.ElementsMatch(t, want.List(), got.List(), step)
	for name := range want.GetIndexers() {
		assert.ElementsMatch(t, want.ListIndexFuncValues(name), got.ListIndexFuncValues(name), "%s: values of %s", step, name)
		for _, v := range values {
			wk, err := want.IndexKeys(name, v)
			require.NoError(t, err)
			gk, err := got.IndexKeys(name, v)
			require.NoError(t, err)
			assert.ElementsMatch(t, wk, gk, "%s: keys under %s=%s", step, name, v)
			wo, _ := want.ByIndex(name, v)
			gobj, _ := got.ByIndex(name, v)
			assert.ElementsMatch(t, wo, gobj, "%s: objects under %s=%s", step, name, v)
		}
	}
	for _, key := range want.ListKeys() {
		w, _, _ := want.GetByKey(key)
		wi, err := want.Index("uses", w)
		require.NoError(t, err)
		gi, err := got.Index("uses", w)
		require.NoError(t, err)
		assert.ElementsMatch(t, wi, gi, "%s: objects sharing a use with %s", step, key)
	}
}

// TestIndexerAnswersAsClientGos drives client-go's store and ours with the same random
// changes (values shared by up to 20 objects, so a value's keys cross from a slice to a set
// and back), repacking ours now and then, and compares every answer after each batch.
func TestIndexerAnswersAsClientGos(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 36))
	want := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers())
	got := New(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers())
	values := []string{"ns-0", "ns-1", "true", "absent"}
	for i := range 6 {
		values = append(values, fmt.Sprint("cm-", i))
	}
	random := func(rv int) *metav1.ObjectMeta {
		var uses []string
		for range r.IntN(4) { // a value twice in one object too
			uses = append(uses, values[4+r.IntN(6)])
		}
		o := obj(fmt.Sprint("ns-", r.IntN(2)), fmt.Sprint("app-", r.IntN(40)), fmt.Sprint(rv), uses...)
		if r.IntN(2) == 0 {
			o.Annotations = map[string]string{"opt": "in"}
		}
		return o
	}
	rv := 0
	for batch := range 40 {
		for range 25 {
			rv++
			switch r.IntN(5) {
			case 0, 1:
				o := random(rv)
				require.NoError(t, want.Add(o))
				require.NoError(t, got.Add(o))
			case 2:
				o := random(rv)
				require.NoError(t, want.Update(o))
				require.NoError(t, got.Update(o))
			case 3:
				o := random(rv)
				require.NoError(t, want.Delete(o))
				require.NoError(t, got.Delete(o))
			case 4:
				if r.IntN(10) == 0 {
					var list []any
					for range r.IntN(30) {
						list = append(list, random(rv))
					}
					require.NoError(t, want.Replace(list, fmt.Sprint(rv)))
					require.NoError(t, got.Replace(list, fmt.Sprint(rv)))
				}
			}
		}
		switch batch % 7 {
		case 3:
			got.Repack(nil)
		case 5: // the objects replaced by equal copies
			got.Repack(func(objs []any) {
				for i, o := range objs {
					objs[i] = o.(*metav1.ObjectMeta).DeepCopy()
				}
			})
		}
		sameAs(t, want, got, values, fmt.Sprint("batch ", batch))
		require.Equal(t, len(want.ListKeys()), got.Len())
	}
}

func TestIndexerRefusesWhatClientGoRefuses(t *testing.T) {
	failing := func(any) ([]string, error) { return nil, errors.New("no values today") }
	tests := []struct {
		name    string
		do      func(s *Indexer) error
		wantErr string
	}{
		{"an index that does not exist", func(s *Indexer) error { _, err := s.ByIndex("byOwner", "x"); return err },
			`index "byOwner" does not exist: the store has [namespace optIn uses]`},
		{"keys of an index that does not exist", func(s *Indexer) error { _, err := s.IndexKeys("byOwner", "x"); return err },
			`index "byOwner" does not exist`},
		{"an index name taken", func(s *Indexer) error { return s.AddIndexers(cache.Indexers{"uses": usesOf}) },
			`index "uses" exists already`},
		{"an object without a key", func(s *Indexer) error { return s.Add("not an object") },
			`couldn't create key for object not an object`},
		{"an index function that fails on add", func(s *Indexer) error {
			if err := s.AddIndexers(cache.Indexers{"failing": failing}); err != nil {
				return err
			}
			return s.Add(obj("ns", "app", "1"))
		}, `index "failing" of "ns/app": no values today`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers())
			assert.ErrorContains(t, tt.do(s), tt.wantErr)
		})
	}
}

func TestIndexerKeepsAnObjectWhoseIndexFails(t *testing.T) {
	s := New(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{"uses": usesOf})
	require.NoError(t, s.AddIndexers(cache.Indexers{"picky": func(o any) ([]string, error) {
		if o.(*metav1.ObjectMeta).Name == "bad" {
			return nil, errors.New("bad name")
		}
		return []string{"ok"}, nil
	}}))
	require.Error(t, s.Add(obj("ns", "bad", "1", "cm-a")))
	got, ok, err := s.GetByKey("ns/bad")
	require.NoError(t, err)
	require.True(t, ok, "stored all the same")
	assert.Equal(t, "bad", got.(*metav1.ObjectMeta).Name)
	keys, err := s.IndexKeys("uses", "cm-a")
	require.NoError(t, err)
	assert.Equal(t, []string{"ns/bad"}, keys, "the other indexes have it")
	require.NoError(t, s.Delete(obj("ns", "bad", "2")))
	assert.Empty(t, s.ListIndexFuncValues("uses"))
	assert.Empty(t, s.ListIndexFuncValues("picky"))
}

func TestIndexerTakesATombstoneAndKeepsTheLastResourceVersion(t *testing.T) {
	s := New(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers())
	require.NoError(t, s.Replace([]any{obj("ns", "a", "5", "cm"), obj("ns", "b", "6", "cm")}, "7"))
	assert.Equal(t, "7", s.LastStoreSyncResourceVersion())
	require.NoError(t, s.Update(obj("ns", "a", "8", "cm")))
	assert.Equal(t, "8", s.LastStoreSyncResourceVersion())
	require.NoError(t, s.Delete(cache.DeletedFinalStateUnknown{Key: "ns/b", Obj: obj("ns", "b", "6", "cm")}))
	assert.Equal(t, "8", s.LastStoreSyncResourceVersion(), "a tombstone's version is not the store's")
	s.Bookmark("9")
	assert.Equal(t, "9", s.LastStoreSyncResourceVersion())
	keys, err := s.IndexKeys("uses", "cm")
	require.NoError(t, err)
	assert.Equal(t, []string{"ns/a"}, keys)
}

func TestRepackStoresThePackedObjects(t *testing.T) {
	s := New(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers())
	before := obj("ns", "a", "1", "cm")
	require.NoError(t, s.Add(before))
	s.Repack(func(objs []any) { objs[0] = obj("ns", "a", "1", "cm") })
	got, ok, err := s.GetByKey("ns/a")
	require.NoError(t, err)
	require.True(t, ok)
	assert.NotSame(t, before, got, "the copy is stored")
	assert.Equal(t, before, got)
	byUse, err := s.ByIndex("uses", "cm")
	require.NoError(t, err)
	assert.Same(t, got, byUse[0], "and found through the indexes")
}

// TestRepackKeepsValuesApart: after Repack the values' keys share one array; adding to one
// value must not write over its neighbour's.
func TestRepackKeepsValuesApart(t *testing.T) {
	s := New(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers())
	for i := range 4 {
		require.NoError(t, s.Add(obj("ns", fmt.Sprint("a", i), "1", "cm-a")))
		require.NoError(t, s.Add(obj("ns", fmt.Sprint("b", i), "1", "cm-b")))
	}
	s.Repack(nil)
	require.NoError(t, s.Delete(obj("ns", "a0", "2")))
	require.NoError(t, s.Add(obj("ns", "a9", "2", "cm-a")))
	require.NoError(t, s.Add(obj("ns", "a8", "2", "cm-a")))
	a, _ := s.IndexKeys("uses", "cm-a")
	b, _ := s.IndexKeys("uses", "cm-b")
	slices.Sort(a)
	slices.Sort(b)
	assert.Equal(t, []string{"ns/a1", "ns/a2", "ns/a3", "ns/a8", "ns/a9"}, a)
	assert.Equal(t, []string{"ns/b0", "ns/b1", "ns/b2", "ns/b3"}, b)
}

// BenchmarkBytesPerWorkload reports the heap each store keeps for a workload as wave's
// benchmark makes them (10,000 in one namespace, each using a ConfigMap and a Secret that one
// other workload uses too, all opted in), indexed as wave indexes them.
func BenchmarkBytesPerWorkload(b *testing.B) {
	const n = 10000
	objs := make([]*metav1.ObjectMeta, n)
	for i := range objs {
		objs[i] = obj("scale", fmt.Sprint("app-", i), "1", fmt.Sprint("ConfigMap scale/cm-", i%(n/2)), fmt.Sprint("Secret scale/s-", i%(n/2)))
		objs[i].Annotations = map[string]string{"opt": "in"}
	}
	stores := []struct {
		name string
		make func() cache.Indexer
	}{
		{"client-go", func() cache.Indexer { return cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers()) }},
		{"compact", func() cache.Indexer { return New(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers()) }},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			for b.Loop() {
				before := heapInUse()
				s := st.make()
				for _, o := range objs {
					_ = s.Add(o)
				}
				if c, ok := s.(*Indexer); ok {
					c.Repack(nil)
				}
				b.ReportMetric(float64(heapInUse()-before)/n, "B/workload")
				runtime.KeepAlive(s)
			}
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
