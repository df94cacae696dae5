package workload

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
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
	assert.ErrorContains(t, Patch(context.Background(), fake.NewSimpleClientset(), "CronJob", "ns", "x", nil), `unknown workload kind "CronJob"`)
}
