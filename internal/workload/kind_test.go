package workload

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// Every kind gives the same view, and reads, lists a page at a time and patches through its
// own client.
func TestKinds(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: "ns", Name: name} }
	objs := map[Kind]runtime.Object{
		Deployment:  &appsv1.Deployment{ObjectMeta: meta("d")},
		StatefulSet: &appsv1.StatefulSet{ObjectMeta: meta("s")},
		DaemonSet:   &appsv1.DaemonSet{ObjectMeta: meta("ds")},
		CronJob:     &batchv1.CronJob{ObjectMeta: meta("cj")},
	}
	for _, typ := range Types() {
		t.Run(string(typ.Kind()), func(t *testing.T) {
			obj := objs[typ.Kind()]
			client := fake.NewSimpleClientset(obj)
			w, ok := Of(obj)
			require.True(t, ok)
			assert.Equal(t, typ.Kind(), w.Kind)
			assert.Equal(t, string(typ.Kind())+"/ns/"+w.Meta.Name, w.Key())
			for _, other := range Types() {
				if other.Kind() != typ.Kind() {
					_, ok := other.Of(obj)
					assert.False(t, ok, "%s claims a %s", other.Kind(), typ.Kind())
				}
			}

			got, err := typ.Get(context.Background(), client, "ns", w.Meta.Name)
			require.NoError(t, err)
			assert.Equal(t, w.Meta.Name, got.Meta.Name)
			list, next, err := typ.List(context.Background(), client, "ns", metav1.ListOptions{Limit: 10})
			require.NoError(t, err)
			assert.Empty(t, next)
			require.Len(t, list, 1)

			require.NoError(t, Patch(context.Background(), client, typ.Kind(), "ns", w.Meta.Name, []byte(`{"metadata":{"annotations":{"a":"b"}}}`)))
			got, err = typ.Get(context.Background(), client, "ns", w.Meta.Name)
			require.NoError(t, err)
			assert.Equal(t, "b", got.Meta.Annotations["a"])
		})
	}
	assert.ErrorContains(t, Patch(context.Background(), fake.NewSimpleClientset(), "Job", "ns", "x", nil), `unknown workload kind "Job"`)
}

// A CronJob's restart is one Job from its template, as kubectl create job --from=cronjob/
// makes it; the other kinds' controllers roll the pods themselves.
func TestRestart(t *testing.T) {
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly", UID: "u1"}}
	cj.Spec.JobTemplate.Labels = map[string]string{"team": "a"}
	cj.Spec.JobTemplate.Annotations = map[string]string{"x": "y"}
	cj.Spec.JobTemplate.Spec.Template.Spec.Containers = []corev1.Container{{Name: "run", Image: "busybox"}}
	client := fake.NewSimpleClientset(cj)
	w, _ := Of(cj)
	require.NoError(t, Restart(context.Background(), client, w))
	jobs, err := client.BatchV1().Jobs("ns").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, jobs.Items, 1)
	j := jobs.Items[0]
	assert.Equal(t, "nightly-", j.GenerateName)
	assert.Equal(t, map[string]string{"cronjob.kubernetes.io/instantiate": "manual", "x": "y"}, j.Annotations)
	assert.Equal(t, map[string]string{"team": "a"}, j.Labels)
	require.Len(t, j.OwnerReferences, 1)
	assert.Equal(t, "CronJob", j.OwnerReferences[0].Kind)
	assert.True(t, *j.OwnerReferences[0].Controller)
	assert.Equal(t, "busybox", j.Spec.Template.Spec.Containers[0].Image)
	assert.True(t, w.Progress.Untracked)

	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app"}}
	dw, _ := Of(d)
	require.NoError(t, Restart(context.Background(), client, dw))
	jobs, _ = client.BatchV1().Jobs("ns").List(context.Background(), metav1.ListOptions{})
	assert.Len(t, jobs.Items, 1, "a Deployment's restart is its template write")
}
