package pollwatch

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

func deploy(uid, rv string) appsv1.Deployment {
	return appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d" + uid, UID: types.UID(uid), ResourceVersion: rv}}
}

func list(rv string, ds ...appsv1.Deployment) *appsv1.DeploymentList {
	return &appsv1.DeploymentList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: ds}
}

func TestDiff(t *testing.T) {
	recreated := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d1", UID: "9", ResourceVersion: "6"}}
	got := diff(snapshotMust(t, list("5", deploy("1", "3"))), snapshotMust(t, list("6", recreated)))
	require.Len(t, got, 2, "recreated under the same name: the old UID deleted, the new added")
	assert.ElementsMatch(t, []watch.EventType{watch.Added, watch.Deleted}, []watch.EventType{got[0].Type, got[1].Type})

	snap := func(l *appsv1.DeploymentList) snapshot { return snapshotMust(t, l) }
	kinds := func(es []watch.Event) map[string]watch.EventType {
		out := map[string]watch.EventType{}
		for _, e := range es {
			out[e.Object.(*appsv1.Deployment).Name] = e.Type
		}
		return out
	}
	tests := []struct {
		name      string
		prev, cur *appsv1.DeploymentList
		want      map[string]watch.EventType
	}{
		{"nothing changed, nothing sent", list("5", deploy("1", "3")), list("6", deploy("1", "3")), map[string]watch.EventType{}},
		{"a new object is added", list("5", deploy("1", "3")), list("6", deploy("1", "3"), deploy("2", "6")), map[string]watch.EventType{"d2": watch.Added}},
		{"a moved resource version is a modification", list("5", deploy("1", "3")), list("6", deploy("1", "6")), map[string]watch.EventType{"d1": watch.Modified}},
		{"a gone object is deleted", list("5", deploy("1", "3"), deploy("2", "4")), list("6", deploy("2", "4")), map[string]watch.EventType{"d1": watch.Deleted}},
		{"no base: everything listed is news", &appsv1.DeploymentList{}, list("6", deploy("1", "3")), map[string]watch.EventType{"d1": watch.Added}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, kinds(diff(snap(tt.prev), snap(tt.cur))))
		})
	}
}

func snapshotMust(t *testing.T, l *appsv1.DeploymentList) snapshot {
	s, err := snapshotOf(l)
	require.NoError(t, err)
	return s
}

// fakeLister serves whatever list the test set, and counts calls.
type fakeLister struct {
	mu    sync.Mutex
	list  *appsv1.DeploymentList
	calls int
}

func (f *fakeLister) set(l *appsv1.DeploymentList) { f.mu.Lock(); f.list = l; f.mu.Unlock() }

func (f *fakeLister) List(metav1.ListOptions) (runtime.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.list.DeepCopy(), nil
}

// An informer on the emulated watch sees a change once it is poked, without any watch right.
func TestInformerFollowsChangesOnPoke(t *testing.T) {
	f := &fakeLister{list: list("5", deploy("1", "3"))}
	poker := NewPoker()
	lw := Wrap(f, poker, time.Hour)
	inf := cache.NewSharedIndexInformer(lw, &appsv1.Deployment{}, 0, cache.Indexers{})
	stop := make(chan struct{})
	defer close(stop)
	go inf.Run(stop)
	require.True(t, cache.WaitForCacheSync(stop, inf.HasSynced))
	get := func(name string) (string, bool) {
		o, ok, _ := inf.GetStore().GetByKey("ns/" + name)
		if !ok {
			return "", false
		}
		return o.(*appsv1.Deployment).ResourceVersion, true
	}
	rv, ok := get("d1")
	require.True(t, ok)
	assert.Equal(t, "3", rv)

	f.set(list("7", deploy("1", "7"), deploy("2", "6")))
	poker.Poke()
	require.Eventually(t, func() bool { rv, _ := get("d1"); _, two := get("d2"); return rv == "7" && two }, 5*time.Second, 10*time.Millisecond)
	f.set(list("8", deploy("2", "6")))
	poker.Poke()
	require.Eventually(t, func() bool { _, one := get("d1"); return !one }, 5*time.Second, 10*time.Millisecond)
}
