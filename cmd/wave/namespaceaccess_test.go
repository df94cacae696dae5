package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configwave/configwave/internal/wave/access"
	"github.com/configwave/configwave/internal/wave/access/accesstest"

	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

// A namespaced install with --namespace-selector refuses to start, saying what to grant,
// instead of never becoming ready.
func TestNamespaceSelectorNeedsNamespaceAccess(t *testing.T) {
	clusterWide := fake.NewClientset()
	accesstest.Answer(clusterWide, func(access.Check) bool { return true })
	require.NoError(t, checkNamespaceAccess(context.Background(), waveclienttest.Wrap(clusterWide)))

	listOnly := fake.NewClientset()
	accesstest.Answer(listOnly, func(c access.Check) bool { return c.Verb == "list" })
	err := checkNamespaceAccess(context.Background(), waveclienttest.Wrap(listOnly))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--namespace-selector reads the labels of namespaces, and wave may not watch namespaces at cluster scope")
	assert.Contains(t, err.Error(), "grant list and watch on namespaces at cluster scope")
}
