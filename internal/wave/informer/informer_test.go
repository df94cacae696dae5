package informer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/digeststore"
)

func TestNewListsWatchesTweaksAndTransforms(t *testing.T) {
	cm := func(name, team string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"team": team}}, Data: map[string]string{"k": "v"}}
	}
	client := fake.NewClientset(cm("listed", "a"), cm("other-team", "b"))
	inf := New[*corev1.ConfigMapList](client.CoreV1().ConfigMaps("ns"), client, &corev1.ConfigMap{}, Options{
		Tweak:    func(o *metav1.ListOptions) { o.LabelSelector = "team=a" },
		Indexers: NamespaceIndex(),
		Transform: func(obj any) (any, error) {
			if c, ok := obj.(*corev1.ConfigMap); ok {
				c.Data = nil // what the cache keeps is what the transform returns
			}
			return obj, nil
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	defer func() { cancel(); <-done }()
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))

	_, err := client.CoreV1().ConfigMaps("ns").Create(ctx, cm("watched", "a"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok, _ := inf.GetIndexer().GetByKey("ns/watched"); return ok }, 10*time.Second, 10*time.Millisecond)

	assert.ElementsMatch(t, []string{"ns/listed", "ns/watched"}, inf.GetIndexer().ListKeys(), "the tweak narrows the list and the watch")
	obj, _, _ := inf.GetIndexer().GetByKey("ns/listed")
	assert.Nil(t, obj.(*corev1.ConfigMap).Data, "the cache keeps the transform's result")
	keys, err := inf.GetIndexer().IndexKeys(cache.NamespaceIndex, "ns")
	require.NoError(t, err)
	assert.Len(t, keys, 2)
}

func TestNewWithoutIndexersHasNone(t *testing.T) {
	client := fake.NewClientset()
	inf := New[*corev1.SecretList](client.CoreV1().Secrets("ns"), client, &corev1.Secret{}, Options{})
	assert.Empty(t, inf.GetIndexer().GetIndexers())
}

func TestPlainHandsEveryChangeToEveryHandlerInOrder(t *testing.T) {
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "listed"}})
	inf := NewPlain[*corev1.ConfigMapList](client.CoreV1().ConfigMaps("ns"), client, &corev1.ConfigMap{}, Options{})
	var mu sync.Mutex
	var seen []string
	record := func(who string) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, fmt.Sprintf("%s add %s initial=%v", who, obj.(*corev1.ConfigMap).Name, initial))
			},
			DeleteFunc: func(obj any) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, fmt.Sprintf("%s delete %s", who, obj.(*corev1.ConfigMap).Name))
			},
		}
	}
	_, err := inf.AddEventHandler(record("a"))
	require.NoError(t, err)
	_, err = inf.AddEventHandler(record("b"))
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	defer func() { cancel(); <-done }()
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
	mu.Lock()
	assert.Equal(t, []string{"a add listed initial=true", "b add listed initial=true"}, seen, "synced means every handler saw the initial list")
	mu.Unlock()

	_, err = inf.AddEventHandler(record("late"))
	assert.ErrorIs(t, err, errStarted)

	_, err = client.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, client.CoreV1().ConfigMaps("ns").Delete(ctx, "listed", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 6 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{"a add new initial=false", "b add new initial=false", "a delete listed", "b delete listed"}, seen[2:])
	_, ok, _ := inf.GetIndexer().GetByKey("ns/new")
	assert.True(t, ok)
}

func TestPlainFillsTheStoreItIsGiven(t *testing.T) {
	cm := func(name, value string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string]string{"k": value}}
	}
	client := fake.NewClientset(cm("listed", "1"))
	store := digeststore.New()
	inf := NewPlain[*corev1.ConfigMapList](client.CoreV1().ConfigMaps("ns"), client, &corev1.ConfigMap{}, Options{Store: store, Transform: confighash.Digest})
	assert.Same(t, store, inf.GetIndexer())
	var mu sync.Mutex
	var seen []string
	digestOf := func(obj any) string { return obj.(*confighash.Digested).Digests()["k"][:8] }
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, fmt.Sprintf("add %s initial=%v", obj.(*confighash.Digested).Name, initial))
		},
		UpdateFunc: func(old, obj any) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, fmt.Sprintf("update %s %s→%s", obj.(*confighash.Digested).Name, digestOf(old), digestOf(obj)))
		},
		DeleteFunc: func(obj any) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, "delete "+obj.(*confighash.Digested).Name)
		},
	})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	defer func() { cancel(); <-done }()
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
	_, err = client.CoreV1().ConfigMaps("ns").Update(ctx, cm("listed", "2"), metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = client.CoreV1().ConfigMaps("ns").Create(ctx, cm("new", "3"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, client.CoreV1().ConfigMaps("ns").Delete(ctx, "listed", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 4 }, 10*time.Second, 10*time.Millisecond)

	d1, d2 := confighash.KeyDigests(must(confighash.Digest(cm("x", "1")))), confighash.KeyDigests(must(confighash.Digest(cm("x", "2"))))
	assert.Equal(t, []string{"add listed initial=true", "update listed " + d1["k"][:8] + "→" + d2["k"][:8], "add new initial=false", "delete listed"}, seen,
		"an update hands over what the store held before it")
	assert.Equal(t, []string{"ns/new"}, store.ListKeys())
}

func must(obj any, err error) any {
	if err != nil {
		panic(err)
	}
	return obj
}

func TestPlainAppliesAListAsClientGoDoes(t *testing.T) {
	cm := func(name, rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	}
	client := fake.NewClientset()
	inf := NewPlain[*corev1.ConfigMapList](client.CoreV1().ConfigMaps("ns"), client, &corev1.ConfigMap{}, Options{})
	var seen []string
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			seen = append(seen, fmt.Sprintf("add %s initial=%v", obj.(*corev1.ConfigMap).Name, initial))
		},
		UpdateFunc: func(old, obj any) {
			seen = append(seen, fmt.Sprintf("update %s %s→%s", obj.(*corev1.ConfigMap).Name, old.(*corev1.ConfigMap).ResourceVersion, obj.(*corev1.ConfigMap).ResourceVersion))
		},
		DeleteFunc: func(obj any) {
			tomb := obj.(cache.DeletedFinalStateUnknown)
			seen = append(seen, fmt.Sprintf("delete %s (last seen at %s)", tomb.Key, tomb.Obj.(*corev1.ConfigMap).ResourceVersion))
		},
	})
	require.NoError(t, err)
	list := func(objs ...any) cache.Deltas {
		return cache.Deltas{{Type: cache.ReplacedAll, Object: cache.ReplacedAllInfo{ResourceVersion: "9", Objects: objs}}}
	}

	require.NoError(t, inf.process(list(cm("kept", "1"), cm("gone", "2")), true))
	assert.Equal(t, []string{"add kept initial=true", "add gone initial=true"}, seen)

	seen = nil
	require.NoError(t, inf.process(list(cm("new", "5"), cm("kept", "4")), false))
	assert.Equal(t, []string{"delete ns/gone (last seen at 2)", "add new initial=false", "update kept 1→4"}, seen,
		"a relist deletes what is gone first, then hands over the list in its order")
	assert.ElementsMatch(t, []string{"ns/kept", "ns/new"}, inf.GetIndexer().ListKeys())

	seen = nil
	require.NoError(t, inf.process(cache.Deltas{{Type: cache.SyncAll, Object: cache.SyncAllInfo{}}}, false))
	assert.ElementsMatch(t, []string{"update kept 4→4", "update new 5→5"}, seen, "a resync hands every object over as an update")

	assert.Error(t, inf.process(cm("x", "1"), false), "only deltas")
	assert.Error(t, inf.process(cache.Deltas{{Type: cache.ReplacedAll, Object: "not a list"}}, false))
}
