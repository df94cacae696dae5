package refusal

import (
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestOf(t *testing.T) {
	secrets := schema.GroupResource{Resource: "secrets"}
	for _, tc := range []struct {
		name string
		err  error
		want Refusal
	}{
		{"an exhausted quota", apierrors.NewForbidden(secrets, "k", assertErr(`exceeded quota: objects, requested: count/secrets=1, used: count/secrets=5, limited: count/secrets=5`)),
			Refusal{By: "ResourceQuota objects (exceeded quota)", Quota: true}},
		{"a quota not computed yet", apierrors.NewForbidden(secrets, "k", assertErr(`status unknown for quota: objects, resources: count/secrets`)),
			Refusal{By: "ResourceQuota objects (status unknown for quota)", Quota: true}},
		{"a webhook, whose own text is not repeated", apierrors.NewForbidden(secrets, "k", assertErr(`admission webhook "policy.example.com" denied the request: value hunter2 is weak`)),
			Refusal{By: "admission webhook policy.example.com"}},
		{"anything else", apierrors.NewForbidden(secrets, "k", assertErr(`no`)),
			Refusal{By: "an admission policy (403 where RBAC allows the create)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Of(tc.err))
		})
	}
}

type assertErr string

func (e assertErr) Error() string { return string(e) }
