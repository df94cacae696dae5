package workload

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/configwave/configwave/internal/wave/podrefs"
)

func TestTrimWorkloadKeepsWhatWaveReads(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns",
		Annotations:   map[string]string{lastApplied: `{"kind":"Deployment"}`, podrefs.UpdateOnConfigChangeAnnotation: "true"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}}
	out, err := Trim(d)
	assert.NoError(t, err)
	require.IsType(t, &Cached{}, out)
	got, ok := Of(out)
	require.True(t, ok)
	assert.Nil(t, got.Meta.ManagedFields)
	assert.Equal(t, map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}, got.Meta.Annotations)

	plain := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"a": "1"}}}
	out, _ = Trim(plain)
	got, ok = Of(out)
	require.True(t, ok)
	assert.Equal(t, map[string]string{"a": "1"}, got.Meta.Annotations)

	tomb := cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: d}
	out, _ = Trim(tomb)
	assert.Equal(t, tomb, out, "anything else passes through")
}
