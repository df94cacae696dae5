package apisource

import (
	"testing"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRef(t *testing.T) {
	tests := []struct {
		name, in string
		want     configref.Ref
		wantErr  string
	}{
		{name: "name only takes the default namespace", in: "nginx", want: configref.Ref{Kind: configref.ConfigMap, Namespace: "web", Name: "nginx"}},
		{name: "namespace and name", in: "kube-system/coredns", want: configref.Ref{Kind: configref.ConfigMap, Namespace: "kube-system", Name: "coredns"}},
		{name: "dotted names are valid", in: "app.config", want: configref.Ref{Kind: configref.ConfigMap, Namespace: "web", Name: "app.config"}},
		{name: "empty", in: "", wantErr: `name "" is not a valid configmap name`},
		{name: "empty namespace", in: "/nginx", wantErr: `namespace "" is not valid`},
		{name: "uppercase name", in: "Nginx", wantErr: `name "Nginx"`},
		{name: "two slashes", in: "a/b/c", wantErr: `name "b/c"`},
		{name: "path traversal", in: "../x", wantErr: `namespace ".."`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRef(configref.ConfigMap, tt.in, "web")
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Contains(t, err.Error(), "--configmap=")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"nginx", "ns/name", "", "/", "a/b/c", "../..", "x.y-z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRef(configref.Secret, s, "default")
		if err != nil {
			return
		}
		// Whatever is accepted must be usable as an API path segment and a folder name.
		require.NotEmpty(t, r.Name)
		require.NotEmpty(t, r.Namespace)
		require.NotContains(t, r.Name, "/")
		require.NotContains(t, r.Namespace, "/")
		require.NotEqual(t, "..", r.Name)
		require.NotEqual(t, ".", r.Name)
	})
}
