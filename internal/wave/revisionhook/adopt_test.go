package revisionhook

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
