package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/configwave/configwave/internal/refs"
)

func cmRef(name string) refs.ObjectRef {
	return refs.ObjectRef{Kind: refs.ConfigMap, Namespace: "ns", Name: name}
}

func TestIndex(t *testing.T) {
	i := NewIndex()
	i.Set("Deployment/ns/a", []refs.ObjectRef{cmRef("shared"), cmRef("a")})
	i.Set("Deployment/ns/b", []refs.ObjectRef{cmRef("shared")})
	assert.ElementsMatch(t, []string{"Deployment/ns/a", "Deployment/ns/b"}, i.Users(cmRef("shared")))
	i.Set("Deployment/ns/a", []refs.ObjectRef{cmRef("a")})
	assert.Equal(t, []string{"Deployment/ns/b"}, i.Users(cmRef("shared")))
	i.Delete("Deployment/ns/b")
	assert.Empty(t, i.Users(cmRef("shared")))
	assert.Equal(t, 1, i.Workloads())
	assert.Equal(t, 1, i.Configs(), "nothing left behind for deleted workloads")
}
