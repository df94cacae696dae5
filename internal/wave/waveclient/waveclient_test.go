package waveclient

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/reference"
)

// request is what the fake API server saw.
type request struct{ method, path, accept, contentType, body string }

func serve(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) (*Client, func() []request) {
	var mu sync.Mutex
	var seen []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, request{r.Method, r.URL.Path, r.Header.Get("Accept"), r.Header.Get("Content-Type"), string(body)})
		mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := New(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	return c, func() []request { mu.Lock(); defer mu.Unlock(); return append([]request(nil), seen...) }
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func TestTypedRequestsGoWhereTheGeneratedClientsSendThem(t *testing.T) {
	c, seen := serve(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "app", "namespace": "ns", "resourceVersion": "7"}})
	})
	d, err := c.AppsV1().Deployments("ns").Get(context.Background(), "app", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "7", d.ResourceVersion)
	_, _ = c.BatchV1().CronJobs("ns").Patch(context.Background(), "nightly", "application/merge-patch+json", []byte(`{"spec":{}}`), metav1.PatchOptions{FieldManager: "configwave-wave"})
	_, _ = c.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	_, _ = c.CoordinationV1().Leases("wave").Get(context.Background(), "wave", metav1.GetOptions{})

	got := seen()
	require.Len(t, got, 4)
	assert.Equal(t, "/apis/apps/v1/namespaces/ns/deployments/app", got[0].path)
	assert.Contains(t, got[0].accept, "application/vnd.kubernetes.protobuf", "protobuf first, as the generated clients ask")
	assert.Equal(t, "PATCH /apis/batch/v1/namespaces/ns/cronjobs/nightly", got[1].method+" "+got[1].path)
	assert.Equal(t, "application/merge-patch+json", got[1].contentType)
	assert.Equal(t, "/api/v1/namespaces", got[2].path)
	assert.Equal(t, "/apis/coordination.k8s.io/v1/namespaces/wave/leases/wave", got[3].path)
}

func TestEventSinkWritesInTheEventsNamespace(t *testing.T) {
	c, seen := serve(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"apiVersion": "v1", "kind": "Event", "metadata": map[string]any{"name": "e", "namespace": "team"}})
	})
	sink := EventSink{Client: c}
	e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "team"}, Reason: "ConfigChanged"}
	_, err := sink.Create(e)
	require.NoError(t, err)
	_, err = sink.Patch(e, []byte(`{"count":2}`))
	require.NoError(t, err)
	got := seen()
	require.Len(t, got, 2)
	assert.Equal(t, "POST /api/v1/namespaces/team/events", got[0].method+" "+got[0].path)
	assert.Equal(t, "PATCH /api/v1/namespaces/team/events/e", got[1].method+" "+got[1].path)
	assert.Equal(t, "application/strategic-merge-patch+json", got[1].contentType)
}

func TestDiscovery(t *testing.T) {
	c, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/argoproj.io/v1alpha1" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure", Reason: metav1.StatusReasonNotFound, Code: 404})
			return
		}
		writeJSON(w, metav1.APIResourceList{GroupVersion: "argoproj.io/v1alpha1", APIResources: []metav1.APIResource{{Name: "rollouts", Kind: "Rollout", Namespaced: true}}})
	})
	list, err := c.Discovery().ServerResourcesForGroupVersion("argoproj.io/v1alpha1")
	require.NoError(t, err)
	require.Len(t, list.APIResources, 1)
	assert.Equal(t, "rollouts", list.APIResources[0].Name)

	_, err = c.Discovery().ServerResourcesForGroupVersion("secrets-store.csi.x-k8s.io/v1")
	assert.True(t, apierrors.IsNotFound(err), "a group not served reads as NotFound, as client-go's discovery says it: %v", err)
}

// Events name their object through the scheme.
func TestSchemeNamesWhatWaveWritesEventsAbout(t *testing.T) {
	for want, obj := range map[string]runtime.Object{
		"apps/v1 Deployment": &appsv1.Deployment{}, "apps/v1 StatefulSet": &appsv1.StatefulSet{}, "apps/v1 DaemonSet": &appsv1.DaemonSet{},
		"batch/v1 CronJob": &batchv1.CronJob{}, "v1 ConfigMap": &corev1.ConfigMap{}, "v1 Secret": &corev1.Secret{},
	} {
		ref, err := reference.GetReference(Scheme, obj)
		require.NoError(t, err, want)
		assert.Equal(t, want, ref.APIVersion+" "+ref.Kind)
	}
}

// --kube-api-qps bounds wave's requests in all, not per API group.
func TestGroupsShareOneRateLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"metadata": map[string]any{"name": "x"}})
	}))
	t.Cleanup(srv.Close)
	c, err := New(&rest.Config{Host: srv.URL, QPS: 2, Burst: 1})
	require.NoError(t, err)
	start := time.Now()
	_, _ = c.CoreV1().ConfigMaps("ns").Get(context.Background(), "x", metav1.GetOptions{})
	_, _ = c.AppsV1().Deployments("ns").Get(context.Background(), "x", metav1.GetOptions{})
	_, _ = c.BatchV1().CronJobs("ns").Get(context.Background(), "x", metav1.GetOptions{})
	// With a bucket per group none of the three would wait; with one, the second and third
	// wait half a second each. Only a lower bound: a slow machine cannot make it fail.
	assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond)
}
