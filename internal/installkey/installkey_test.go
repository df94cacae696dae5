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
)

func TestLoadMakesTheKeyOnceAndKeepsIt(t *testing.T) {
	client := fake.NewSimpleClientset()
	key, err := Load(context.Background(), client, "ops", "k", true)
	require.NoError(t, err)
	assert.Len(t, key, Size)
	s, err := client.CoreV1().Secrets("ops").Get(context.Background(), "k", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, *s.Immutable)
	again, err := Load(context.Background(), client, "ops", "k", true)
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
	key, err := Load(context.Background(), client, "ops", "k", true)
	require.NoError(t, err)
	assert.Equal(t, theirs, key)
}

func TestLoadSaysWhatToDo(t *testing.T) {
	forbidden := fake.NewSimpleClientset()
	forbidden.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "k", nil)
	})
	_, err := Load(context.Background(), forbidden, "ops", "k", true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "install key Secret ops/k")
	assert.Contains(t, err.Error(), "may not create it")

	_, err = Load(context.Background(), fake.NewSimpleClientset(), "ops", "k", false)
	require.ErrorIs(t, err, ErrMissing, "a dry run makes nothing")

	short := fake.NewSimpleClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "k"}, Data: map[string][]byte{DataKey: []byte("SHORTSECRET")}})
	_, err = Load(context.Background(), short, "ops", "k", true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "11 bytes")
	assert.NotContains(t, err.Error(), "SHORTSECRET", "never the key")
}
