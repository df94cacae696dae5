package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/configwave/configwave/internal/refs"
	"github.com/configwave/configwave/internal/workload"
)

func TestTrimWorkloadKeepsWhatWaveReads(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns",
		Annotations:   map[string]string{lastApplied: `{"kind":"Deployment"}`, refs.UpdateOnConfigChangeAnnotation: "true"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}}
	out, err := trimWorkload(d)
	assert.NoError(t, err)
	got := out.(*workload.Cached)
	assert.Nil(t, got.ManagedFields)
	assert.Equal(t, map[string]string{refs.UpdateOnConfigChangeAnnotation: "true"}, got.Annotations)

	plain := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"a": "1"}}}
	out, _ = trimWorkload(plain)
	assert.Equal(t, map[string]string{"a": "1"}, out.(*workload.Cached).Annotations)

	tomb := cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: d}
	out, _ = trimWorkload(tomb)
	assert.Equal(t, tomb, out, "anything else passes through")
}
