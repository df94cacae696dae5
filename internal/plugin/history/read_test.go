package history

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
	"github.com/configwave/configwave/internal/wave/workload"
)

// Two changes in one second each start a Job: the run of the CronJob's template now is the
// newer revision, whatever the Jobs' names.
func TestJobsOfOneSecondOrderedByTheCronJobsTemplate(t *testing.T) {
	yes := true
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly", UID: "uid-cj"}}
	template := func(hash string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"configwave.io/config-inputs-hash": hash}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	}
	cj.Spec.JobTemplate.Spec.Template = template("rev-b")
	job := func(name, hash string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(t0),
			OwnerReferences: []metav1.OwnerReference{{Kind: "CronJob", Name: "nightly", UID: "uid-cj", Controller: &yes}}},
			Spec: batchv1.JobSpec{Template: template(hash)}}
	}
	// "a-..." sorts first by name, though it is the CronJob's template now.
	client := fake.NewSimpleClientset(job("a-second", "rev-b"), job("z-first", "rev-a"))
	w, ok := workload.Of(cj)
	require.True(t, ok)
	revs, err := Reader{Kube: waveclienttest.Wrap(client)}.jobs(context.Background(), w)
	require.NoError(t, err)
	require.Len(t, revs, 2)
	assert.Equal(t, "rev-a", revs[0].InputsHash)
	assert.Equal(t, "rev-b", revs[1].InputsHash, "the CronJob's template now is the newest")
}
