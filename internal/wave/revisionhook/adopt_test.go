package revisionhook

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

// The owner a pod names is read and checked before any reference is added: the webhook's port
// answers whoever reaches it.
func TestAdopterAddsOnlyTheRevisionThatUsesTheSnapshot(t *testing.T) {
	immutable := true
	snap := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app-0123456789", Labels: map[string]string{revisions.ManagedByLabel: revisions.ManagedBy}}, Immutable: &immutable}
	notOurs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app"}}
	rsOf := func(name, uid, rev string) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID(uid)},
			Spec: appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{InputsHashAnnotation: rev}}}}}
	}
	client := fake.NewClientset(snap, notOurs, rsOf("web-1", "u1", revision), rsOf("web-2", "u2", revisions.InputsHash("other")))
	var failed atomic.Int32
	a := &Adopter{Client: waveclienttest.Wrap(client), Failed: func() { failed.Add(1) }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	ref := configref.Ref{Kind: configref.ConfigMap, Namespace: "shop", Name: snap.Name}
	owners := func() []metav1.OwnerReference {
		cm, err := client.CoreV1().ConfigMaps("shop").Get(context.Background(), snap.Name, metav1.GetOptions{})
		require.NoError(t, err)
		return cm.OwnerReferences
	}
	a.Add("shop", revisions.Owner{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-2", UID: "u2"}, revision, []configref.Ref{ref})
	a.Add("shop", revisions.Owner{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "forged"}, revision, []configref.Ref{ref})
	a.Add("shop", revisions.Owner{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "u1"}, revision, []configref.Ref{ref, {Kind: configref.ConfigMap, Namespace: "shop", Name: "app"}})
	require.Eventually(t, func() bool { return len(owners()) == 1 && failed.Load() == 3 }, 5*time.Second, 10*time.Millisecond,
		"a ReplicaSet of another revision, a forged uid, an object that is not a snapshot: refused; the pod's own ReplicaSet added")
	cancel()
	<-done
	assert.Equal(t, "web-1", owners()[0].Name, "only the ReplicaSet of the pod's revision, by its own uid")
	cm, err := client.CoreV1().ConfigMaps("shop").Get(context.Background(), "app", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, cm.OwnerReferences, "a source is never written")
}

// A StatefulSet deleted and made again under its name has ControllerRevisions of the names its
// predecessor's had: the pod's set uid tells them apart, so the new one's revision is adopted
// too, and a revision the pod's set does not control is refused.
func TestAdopterTellsARecreatedSetsRevisionApart(t *testing.T) {
	immutable := true
	snap := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app-0123456789", Labels: map[string]string{revisions.ManagedByLabel: revisions.ManagedBy}}, Immutable: &immutable}
	yes := true
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-5c8b", UID: "cr-old",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "set-old", Controller: &yes}}},
		Data: runtime.RawExtension{Raw: []byte(`{"spec":{"template":{"metadata":{"annotations":{"` + InputsHashAnnotation + `":"` + revision + `"}}}}}`)}}
	client := fake.NewClientset(snap, cr)
	var failed atomic.Int32
	a := &Adopter{Client: waveclienttest.Wrap(client), Failed: func() { failed.Add(1) }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = a.Run(ctx) }()
	ref := configref.Ref{Kind: configref.ConfigMap, Namespace: "shop", Name: snap.Name}
	owners := func() []string {
		cm, err := client.CoreV1().ConfigMaps("shop").Get(context.Background(), snap.Name, metav1.GetOptions{})
		require.NoError(t, err)
		var uids []string
		for _, r := range cm.OwnerReferences {
			uids = append(uids, string(r.UID))
		}
		return uids
	}
	owner := func(set types.UID) revisions.Owner {
		return revisions.Owner{APIVersion: "apps/v1", Kind: "ControllerRevision", Name: "db-5c8b", Parent: set}
	}
	a.Add("shop", owner("set-old"), revision, []configref.Ref{ref})
	require.Eventually(t, func() bool { return len(owners()) == 1 }, 5*time.Second, 10*time.Millisecond)

	// The set is deleted and made again: its revision of the same name is a new object.
	require.NoError(t, client.AppsV1().ControllerRevisions("shop").Delete(ctx, cr.Name, metav1.DeleteOptions{}))
	again := cr.DeepCopy()
	again.ResourceVersion, again.UID, again.OwnerReferences[0].UID = "", "cr-new", "set-new"
	_, err := client.AppsV1().ControllerRevisions("shop").Create(ctx, again, metav1.CreateOptions{})
	require.NoError(t, err)
	a.Add("shop", owner("set-new"), revision, []configref.Ref{ref})
	require.Eventually(t, func() bool { return len(owners()) == 2 }, 5*time.Second, 10*time.Millisecond,
		"the recreated set's revision is adopted, not taken for the one done")
	assert.ElementsMatch(t, []string{"cr-old", "cr-new"}, owners())

	a.Add("shop", owner("set-other"), revision, []configref.Ref{ref})
	require.Eventually(t, func() bool { return failed.Load() == 1 }, 5*time.Second, 10*time.Millisecond, "a revision of another set is refused")
	assert.Len(t, owners(), 2)
}

// Past its queue, an adoption is dropped and counted, never blocking the webhook.
func TestAdopterCountsWhatItDrops(t *testing.T) {
	var dropped atomic.Int32
	a := &Adopter{Client: waveclienttest.Wrap(fake.NewClientset()), Dropped: func() { dropped.Add(1) }}
	ref := configref.Ref{Kind: configref.ConfigMap, Namespace: "shop", Name: "app-0123456789"}
	for i := range adoptQueue + 3 { // Run not started: nothing leaves the queue
		a.Add("shop", revisions.Owner{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: fmt.Sprintf("web-%d", i), UID: types.UID(fmt.Sprint(i))}, revision, []configref.Ref{ref})
	}
	assert.EqualValues(t, 3, dropped.Load())
}
