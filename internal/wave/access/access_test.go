package access_test

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

func TestRequire(t *testing.T) {
	for _, tt := range []struct {
		name    string
		allow   func(access.Check) bool
		checks  []access.Check
		wantErr string
	}{
		{name: "all allowed", allow: func(access.Check) bool { return true },
			checks: access.Each([]string{"a", "b"}, "apps", "deployments", "list", "watch")},
		{name: "one namespace denied: named, with what to grant", allow: func(c access.Check) bool { return c.Namespace != "b" || c.Verb != "watch" },
			checks:  access.Each([]string{"a", "b"}, "apps", "deployments", "list", "watch"),
			wantErr: "the feature reads deployments, and wave may not watch deployments.apps in namespace b: grant it"},
		{name: "every namespace, cluster scope", allow: func(access.Check) bool { return false },
			checks:  []access.Check{{Verb: "list", Resource: "namespaces", Cluster: true}, {Verb: "watch", Resource: "pods"}},
			wantErr: "the feature reads deployments, and wave may not list namespaces at cluster scope, nor watch pods in every namespace: grant it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			accesstest.Answer(client, tt.allow)
			err := access.Require(context.Background(), waveclienttest.Wrap(client), "the feature reads deployments", "grant it", tt.checks...)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tt.wantErr)
		})
	}
}
