package autorollback

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestRolloutStillFailed(t *testing.T) {
	const annotation, failed = "configwave.io/config-inputs-hash", "rev-bad"
	rollout := func(hash string, generation int64, aborted bool) *unstructured.Unstructured {
		r := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
			"metadata": map[string]any{"namespace": "shop", "name": "web", "generation": generation},
			"spec":     map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": map[string]any{annotation: hash}}}}}}
		if aborted {
			r.Object["status"] = map[string]any{"abort": true}
		}
		return r
	}
	for _, tc := range []struct {
		name string
		r    *unstructured.Unstructured
		err  string
	}{
		{"as judged: abort", rollout(failed, 4, false), ""},
		{"an image fixed since (a new generation): left as it is", rollout(failed, 5, false), "its spec changed since the rollout was judged to have failed"},
		{"another config since: left as it is", rollout("rev-next", 5, false), "no longer of the failed config"},
		{"aborted already (by its analysis, by hand, or by this wave before a restart)", rollout(failed, 4, true), "aborted already"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := RolloutStillFailed(tc.r, annotation, failed, 4)
			if tc.err == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.err)
			assert.ErrorContains(t, err, "rollout shop/web", "names the object")
			assert.Equal(t, tc.r.Object["status"] != nil, errors.Is(err, ErrAbortedAlready))
		})
	}
	patch, err := AbortPatchAt("42")
	assert.NoError(t, err)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"42"},"status":{"abort":true}}`, string(patch))
}
