package installkey

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/configwave/configwave/internal/waveclient/waveclienttest"
)

func TestLoadMakesTheKeyOnceAndKeepsIt(t *testing.T) {
	client := fake.NewSimpleClientset()
	key, home, err := Load(context.Background(), waveclienttest.Wrap(client), "ops", "k", true)
	require.NoError(t, err)
	assert.Equal(t, InSecret, home)
	assert.Len(t, key, Size)
	s, err := client.CoreV1().Secrets("ops").Get(context.Background(), "k", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, *s.Immutable)
	again, _, err := Load(context.Background(), waveclienttest.Wrap(client), "ops", "k", true)
	require.NoError(t, err)
	assert.Equal(t, key, again, "the next start reads the same key")
}

func TestLoadUsesTheKeyAnotherReplicaMadeFirst(t *testing.T) {
	theirs := []byte("0123456789abcdef0123456789abcdef")
	client := fake.NewSimpleClientset()
	client.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "k"}, Data: map[string][]byte{DataKey: theirs}}
		require.NoError(t, client.Tracker().Add(s))
		return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, "k")
	})
	key, _, err := Load(context.Background(), waveclienttest.Wrap(client), "ops", "k", true)
	require.NoError(t, err)
	assert.Equal(t, theirs, key)
}

// forbid makes the fake API server refuse verb on each resource, as a peer's RBAC does.
func forbid(client *fake.Clientset, verb string, resources ...string) {
	for _, r := range resources {
		client.PrependReactor(verb, r, func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: r}, "k", nil)
		})
	}
}

// Under a peer's RBAC the key lives where wave may write, and is found there again.
func TestLoadFindsAHomeThePeersRBACAllows(t *testing.T) {
	tests := []struct {
		name      string
		forbidden map[string][]string // verb → resources
		want      Home
	}{
		{"wave's own RBAC: a Secret", nil, InSecret},
		{"Stakater Reloader's chart: no Secret made, a ConfigMap in its namespace", map[string][]string{"create": {"secrets"}}, InConfigMap},
		{"Wave's chart: neither Secret nor ConfigMap made, a Lease", map[string][]string{"create": {"secrets", "configmaps"}, "get": {"configmaps"}}, InLease},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewSimpleClientset()
			for verb, res := range tt.forbidden {
				forbid(client, verb, res...)
			}
			key, home, err := Load(context.Background(), waveclienttest.Wrap(client), "ops", "k", true)
			require.NoError(t, err)
			assert.Equal(t, tt.want, home)
			again, home, err := Load(context.Background(), waveclienttest.Wrap(client), "ops", "k", true)
			require.NoError(t, err)
			assert.Equal(t, tt.want, home)
			assert.Equal(t, key, again, "the next start reads the same key")
		})
	}
	t.Run("a key already in a ConfigMap is kept when Secrets may be created later", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "k"}, BinaryData: map[string][]byte{DataKey: []byte("0123456789abcdef0123456789abcdef")}}
		key, home, err := Load(context.Background(), waveclienttest.Wrap(fake.NewSimpleClientset(cm)), "ops", "k", true)
		require.NoError(t, err)
		assert.Equal(t, InConfigMap, home)
		assert.Equal(t, cm.BinaryData[DataKey], key)
	})
}

func TestLoadSaysWhatToDo(t *testing.T) {
	forbidden := fake.NewSimpleClientset()
	forbid(forbidden, "create", "secrets", "configmaps", "leases")
	_, _, err := Load(context.Background(), waveclienttest.Wrap(forbidden), "ops", "k", true)
	require.ErrorIs(t, err, ErrNowhere)
	assert.Contains(t, err.Error(), "install key ops/k")
	assert.Contains(t, err.Error(), "kubectl -n ops create secret generic k --from-literal=key=")

	_, _, err = Load(context.Background(), waveclienttest.Wrap(fake.NewSimpleClientset()), "ops", "k", false)
	require.ErrorIs(t, err, ErrMissing, "a dry run makes nothing")

	short := fake.NewSimpleClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "k"}, Data: map[string][]byte{DataKey: []byte("SHORTSECRET")}})
	_, _, err = Load(context.Background(), waveclienttest.Wrap(short), "ops", "k", true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "11 bytes")
	assert.NotContains(t, err.Error(), "SHORTSECRET", "never the key")
}
