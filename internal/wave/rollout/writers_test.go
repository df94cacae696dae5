package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/slimcache"
	"github.com/configwave/configwave/internal/wave/sourceready"
)

// A Secret's writers are found by the Secret they write, in its namespace only, and each that
// has a write in flight is named with its verdict; one with none, or unreadable, is not.
func TestWritersNotDone(t *testing.T) {
	writers := cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{bySecret: writerSecretIndex})
	for _, w := range []*sourceready.Writer{
		{Identity: slimcache.Identity{Namespace: "a", Name: "web"}, Kind: sourceready.Certificate, Secret: "tls", NotDone: "its issuance is under way (Issuing: Renewing)"},
		{Identity: slimcache.Identity{Namespace: "a", Name: "db"}, Kind: sourceready.ExternalSecret, Secret: "tls", NotDone: "it has not synced yet"},
		{Identity: slimcache.Identity{Namespace: "a", Name: "done"}, Kind: sourceready.ExternalSecret, Secret: "tls"},
		{Identity: slimcache.Identity{Namespace: "a", Name: "broken"}, Kind: sourceready.Certificate, Secret: "tls", UnreadableField: "status.conditions[0]"},
		{Identity: slimcache.Identity{Namespace: "b", Name: "web"}, Kind: sourceready.Certificate, Secret: "tls", NotDone: "its issuance is under way"},
		{Identity: slimcache.Identity{Namespace: "a", Name: "none"}, Kind: sourceready.ExternalSecret}, // creationPolicy None
	} {
		require.NoError(t, writers.GetIndexer().Add(w))
	}
	inf := &Informers{writers: []cache.SharedIndexInformer{writers}}
	for _, tc := range []struct {
		name string
		ref  configref.Ref
		want string
	}{
		{"two writers in flight, named in a stable order", configref.Ref{Kind: configref.Secret, Namespace: "a", Name: "tls"},
			"certificate/web says its issuance is under way (Issuing: Renewing), and externalsecret/db says it has not synced yet"},
		{"another namespace's writers of a Secret of that name are its own", configref.Ref{Kind: configref.Secret, Namespace: "b", Name: "tls"},
			"certificate/web says its issuance is under way"},
		{"a Secret no writer writes", configref.Ref{Kind: configref.Secret, Namespace: "a", Name: "other"}, ""},
		{"a ConfigMap of that name: writers write Secrets", configref.Ref{Kind: configref.ConfigMap, Namespace: "a", Name: "tls"}, ""},
		{"no writer followed (its kind not served, or not granted)", configref.Ref{Kind: configref.Secret, Namespace: "a", Name: "tls"}, "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := inf
			if tc.want == "-" {
				i, tc.want = &Informers{}, ""
			}
			assert.Equal(t, tc.want, i.Incomplete(tc.ref))
		})
	}
}
