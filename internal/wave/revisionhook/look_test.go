package revisionhook

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

// Ours, or not used: a ConfigMap under an index's or a snapshot's name points no pod anywhere
// unless it is wave's (immutable, labelled as wave's, annotated with the content its name
// gives). Someone who may write ConfigMaps but not read Secrets cannot point a workload's
// Secret mounts at an old, rotated-out snapshot by making an index of their own.
func TestAPILookTrustsOnlyWavesOwn(t *testing.T) {
	yes, no := true, false
	rev := revisions.InputsHash("web")
	ours := map[string]string{revisions.ManagedByLabel: revisions.ManagedBy}
	meta := func(name, content string, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: labels, Annotations: map[string]string{revisions.ContentAnnotation: content}}
	}
	client := fake.NewSimpleClientset(
		&corev1.ConfigMap{ObjectMeta: meta(revisions.IndexName(rev), rev, ours), Immutable: &yes, Data: map[string]string{"secret.db": "db-0123456789"}},
		&corev1.ConfigMap{ObjectMeta: meta(revisions.IndexName(revisions.InputsHash("forged")), revisions.InputsHash("forged"), ours), Immutable: &no,
			Data: map[string]string{"secret.db": "db-old0000000"}},
		&corev1.ConfigMap{ObjectMeta: meta(revisions.IndexName(revisions.InputsHash("unlabelled")), revisions.InputsHash("unlabelled"), nil), Immutable: &yes},
		&corev1.Secret{ObjectMeta: meta("db-0123456789", "0123456789", ours), Immutable: &yes},
		&corev1.Secret{ObjectMeta: meta("db-aaaaaaaaaa", "bbbbbbbbbb", ours), Immutable: &yes}, // its annotation names other content
		&corev1.Secret{ObjectMeta: meta("db-cccccccccc", "cccccccccc", nil), Immutable: &yes},  // not labelled as wave's
	)
	l := &APILook{Core: waveclienttest.Wrap(client).CoreV1()}
	ctx := context.Background()

	data, found, err := l.Index(ctx, "shop", revisions.IndexName(rev))
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, "db-0123456789", data["secret.db"])
	for _, name := range []string{revisions.IndexName(revisions.InputsHash("forged")), revisions.IndexName(revisions.InputsHash("unlabelled"))} {
		_, found, err := l.Index(ctx, "shop", name)
		assert.True(t, found, name)
		assert.ErrorContains(t, err, "is not a snapshot index wave made", "%s: the pod reads the live objects, and the Event says why", name)
	}
	secret := func(name string) configref.Ref {
		return configref.Ref{Kind: configref.Secret, Namespace: "shop", Name: name}
	}
	assert.True(t, l.Exists(ctx, secret("db-0123456789")))
	assert.False(t, l.Exists(ctx, secret("db-aaaaaaaaaa")), "another content's annotation")
	assert.False(t, l.Exists(ctx, secret("db-cccccccccc")), "not labelled as wave's")
	assert.False(t, l.Exists(ctx, secret("db-gone000000")), "gone")
}

// A read of a snapshot that the API server does not answer (a timeout) names no snapshot: the
// pod reads its source live rather than mount an object that may be gone.
func TestAPILookTakesNoAnswerForAbsent(t *testing.T) {
	yes := true
	client := fake.NewSimpleClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-0123456789",
		Labels: map[string]string{revisions.ManagedByLabel: revisions.ManagedBy}, Annotations: map[string]string{revisions.ContentAnnotation: "0123456789"}}, Immutable: &yes})
	client.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewTimeoutError("the API server did not answer in time", 1)
	})
	l := &APILook{Core: waveclienttest.Wrap(client).CoreV1()}
	assert.False(t, l.Exists(context.Background(), configref.Ref{Kind: configref.Secret, Namespace: "shop", Name: "db-0123456789"}))
}
