package workload

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Job a rollout of a CronJob starts carries the template as the rollout writes it (its new
// inputs hash names the config revision its pods read), and the cached CronJob is not touched.
func TestWithTemplateAnnotations(t *testing.T) {
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backup"}}
	cj.Spec.JobTemplate.Spec.Template.Annotations = map[string]string{"configwave.io/config-inputs-hash": "rev-old", "team": "a"}
	w, ok := Of(cj)
	require.True(t, ok)
	got := WithTemplateAnnotations(w, map[string]string{"configwave.io/config-inputs-hash": "rev-new"})
	job := got.Object.(*batchv1.CronJob).Spec.JobTemplate.Spec.Template.Annotations
	assert.Equal(t, map[string]string{"configwave.io/config-inputs-hash": "rev-new", "team": "a"}, job)
	assert.Equal(t, "rev-new", got.Template.Annotations["configwave.io/config-inputs-hash"])
	assert.Equal(t, "rev-old", cj.Spec.JobTemplate.Spec.Template.Annotations["configwave.io/config-inputs-hash"], "the cache's object is left as it is")
	d, ok := Of(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}})
	require.True(t, ok)
	assert.Equal(t, d, WithTemplateAnnotations(d, map[string]string{"x": "y"}), "only a CronJob starts a Job")
}
