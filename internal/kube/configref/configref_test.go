package configref

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		ref           Ref
		str, short    string
		fromNamespace string
		resource      string
	}{
		{Ref{ConfigMap, "web", "nginx"}, "configmap web/nginx", "configmap/nginx", "web", "configmaps"},
		{Ref{Secret, "web", "tls"}, "secret web/tls", "secret/web/tls", "other", "secrets"},
		{Ref{Kind("Folder"), "", "/etc/app"}, "folder /etc/app", "folder//etc/app", "", "folders"},
	} {
		assert.Equal(t, tc.str, tc.ref.String())
		assert.Equal(t, tc.short, tc.ref.Short(tc.fromNamespace))
		assert.Equal(t, tc.resource, tc.ref.Kind.Resource())
	}
}

func TestCompare(t *testing.T) {
	got := []Ref{
		{Secret, "a", "x"},
		{ConfigMap, "b", "a"},
		{ConfigMap, "a", "z"},
		{ConfigMap, "a", "b"},
	}
	slices.SortFunc(got, Compare)
	assert.Equal(t, []Ref{
		{ConfigMap, "a", "b"},
		{ConfigMap, "a", "z"},
		{ConfigMap, "b", "a"},
		{Secret, "a", "x"},
	}, got)
	assert.Zero(t, Compare(Ref{Secret, "a", "x"}, Ref{Secret, "a", "x"}))
}
