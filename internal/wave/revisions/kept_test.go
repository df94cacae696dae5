package revisions

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/confighash"
)

// failingGet answers every read with err.
type failingGet struct{ err error }

func (f failingGet) Get(context.Context, configref.Ref) (metav1.Object, error) { return nil, f.err }

func TestKept(t *testing.T) {
	uses := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}}}}
	made := func(t *testing.T) (*memAPI, Snapshots) {
		api := shop()
		snaps, err := Ensure(context.Background(), api, confighash.Digester{Key: []byte("0123456789abcdef0123456789abcdef")}, "shop", h1, atDecision)
		require.NoError(t, err)
		return api, snaps
	}
	indexRef := configref.Ref{Kind: configref.ConfigMap, Namespace: "shop", Name: IndexName(h1)}
	for _, tc := range []struct {
		name     string
		change   func(api *memAPI, snaps Snapshots)
		template *corev1.PodTemplateSpec
		gone     string // the error wraps ErrConfigGone and says this
		err      string // another error, not ErrConfigGone
	}{
		{name: "index and snapshots kept", template: uses},
		{name: "no source, no index", change: func(api *memAPI, _ Snapshots) { delete(api.objs, indexRef) }, template: &corev1.PodTemplateSpec{}},
		{name: "index gone", change: func(api *memAPI, _ Snapshots) { delete(api.objs, indexRef) }, template: uses,
			gone: "its index configmap " + IndexName(h1) + " is gone"},
		{name: "index made by someone else", change: func(api *memAPI, _ Snapshots) {
			api.objs[indexRef] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: IndexName(h1), Namespace: "shop"}, Data: map[string]string{}}
		}, template: uses, gone: "is not one wave made"},
		{name: "a snapshot gone", change: func(api *memAPI, snaps Snapshots) {
			delete(api.objs, configref.Ref{Kind: configref.Secret, Namespace: "shop", Name: snaps[secDB]})
		}, template: uses, gone: "its snapshot secret db-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, snaps := made(t)
			if tc.change != nil {
				tc.change(api, snaps)
			}
			got, err := Kept(context.Background(), api, "shop", h1, tc.template)
			if tc.gone != "" {
				require.ErrorIs(t, err, ErrConfigGone)
				assert.Contains(t, err.Error(), tc.gone)
				if strings.Contains(tc.gone, "snapshot") {
					assert.Equal(t, snaps, got, "what the index names, beside the error")
				}
				return
			}
			require.NoError(t, err)
			if len(SourcesOf("shop", &tc.template.Spec)) > 0 {
				assert.Equal(t, snaps, got)
			} else {
				assert.Empty(t, got)
			}
		})
	}
	t.Run("an API error is not taken for gone", func(t *testing.T) {
		_, err := Kept(context.Background(), failingGet{apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("no"))}, "shop", h1, uses)
		require.Error(t, err)
		assert.False(t, errors.Is(err, ErrConfigGone))
		assert.True(t, apierrors.IsForbidden(err))
	})
}
