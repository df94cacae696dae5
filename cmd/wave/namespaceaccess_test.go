package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A namespaced install with --namespace-selector refuses to start, saying what to grant,
// instead of never becoming ready.
func TestNamespaceSelectorNeedsNamespaceAccess(t *testing.T) {
	require.NoError(t, checkNamespaceAccess(context.Background(), fake.NewSimpleClientset()))

	client := fake.NewSimpleClientset()
	client.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", assert.AnError)
	})
	err := checkNamespaceAccess(context.Background(), client)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--namespace-selector")
	assert.Contains(t, err.Error(), "list and watch on namespaces at cluster scope")
}
