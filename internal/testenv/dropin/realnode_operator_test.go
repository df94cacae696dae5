package dropin

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testpod"
)

// The Prometheus Operator's own Prometheus on a real node, whole: the operator (built from its
// module, run against the control plane) renders the StatefulSet with our image as its
// --prometheus-config-reloader, and kubelet runs every container of it as rendered. Our
// init-config-reloader writes the config from the operator's gzipped Secret; Prometheus
// (Debian's, named in the Prometheus object's spec.image) starts from it; our config-reloader
// watches the Secret and the rule ConfigMap kubelet mounts; every probe the operator set
// passes. Then the two ways users change it: a PrometheusRule created (the operator's
// ConfigMap → kubelet's swap → our reload → Prometheus serves the rule), and the Prometheus
// object changed (the operator's Secret → the same path → the new config served).
func TestPrometheusOperatorOnARealNode(t *testing.T) {
	c := testcluster.Need(t, cluster)
	prometheus := testcluster.NeedProgram(t, "prometheus", "prometheus")
	node := testcluster.NeedNode(t, c)
	client := adminClient(t)
	layout := testpod.Layout(t) // built once per test binary, before the import's own time starts
	require.NoError(t, node.ImportLayoutImage(ctx(t), layout, "reloader", ourImage))
	importPrometheus(t, node, prometheus)
	ns := c.Namespace(t, client)
	testcluster.StartPrometheusOperator(t, cluster, ourImage, ns)
	node.ScheduleHereOnly(t, client)
	dyn, err := dynamic.NewForConfig(cluster.Config())
	require.NoError(t, err)
	prometheuses := dyn.Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheuses"}).Namespace(ns)
	_, err = prometheuses.Create(ctx(t), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus",
		"metadata": map[string]any{"name": "demo", "namespace": ns},
		"spec": map[string]any{"replicas": 1, "image": prometheusImage, "version": debianPrometheusVersion(t, prometheus),
			"serviceMonitorSelector": map[string]any{}, "ruleSelector": map[string]any{}, "externalLabels": map[string]any{"change": "v1"}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)

	var pod corev1.Pod
	if !assert.Eventually(t, func() bool {
		pods, err := client.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=prometheus"})
		if err != nil || len(pods.Items) != 1 {
			return false
		}
		pod = pods.Items[0]
		return testcluster.PodReady(pod)
	}, 3*time.Minute, 200*time.Millisecond, "the operator's Prometheus pod never became ready on the real node (its probes)") {
		t.Fatal(testcluster.DescribePods(ctx(t), client, ns))
	}
	assert.Equal(t, node.Name, pod.Spec.NodeName)
	for _, name := range []string{"init-config-reloader", "config-reloader"} {
		ctr, err := Container(pod.Spec, name)
		require.NoError(t, err)
		assert.Equal(t, ourImage, ctr.Image, "the operator runs our image as %s", name)
	}
	prom := "http://" + pod.Status.PodIP + ":9090"
	require.Contains(t, servedConfig(prom), "change: v1", "Prometheus runs the config our init container wrote")

	created := time.Now()
	rules := dyn.Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}).Namespace(ns)
	_, err = rules.Create(ctx(t), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
		"metadata": map[string]any{"name": "configwave", "namespace": ns},
		"spec": map[string]any{"groups": []any{map[string]any{"name": "configwave", "rules": []any{
			map[string]any{"record": "configwave:up", "expr": "vector(1)"}}}}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(get(prom+"/api/v1/rules"), `"name":"configwave"`) }, time.Minute, 50*time.Millisecond,
		"Prometheus never served the new rule group")
	t.Logf("PrometheusRule created → Prometheus serving its group: %s", time.Since(created).Round(time.Millisecond))

	patched := time.Now()
	_, err = prometheuses.Patch(ctx(t), "demo", types.MergePatchType, []byte(`{"spec":{"externalLabels":{"change":"v2"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(servedConfig(prom), "change: v2") }, time.Minute, 50*time.Millisecond,
		"Prometheus never served the operator's new config")
	t.Logf("Prometheus object patched → Prometheus serving the new config: %s", time.Since(patched).Round(time.Millisecond))

	sidecar, err := Container(pod.Spec, "config-reloader")
	require.NoError(t, err)
	// Once seen in four runs: an empty answer here, right after the change. Asked again for a
	// few seconds, and every answer that is not the series is logged, so a run that sees it
	// again says what it was.
	var last string
	assert.Eventually(t, func() bool {
		resp, err := http.Get("http://" + pod.Status.PodIP + ":8080/metrics")
		if err != nil {
			last = err.Error()
			t.Logf("config-reloader's metrics: %v", err)
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if last = string(b); resp.StatusCode != http.StatusOK {
			t.Logf("config-reloader's metrics: %s: %.200s", resp.Status, b)
		}
		return strings.Contains(last, "reloader_last_reload_successful 1")
	}, 5*time.Second, 100*time.Millisecond, "prometheus-config-reloader's series, on the operator's reloader-web port (args %q): %.300s", sidecar.Args, last)
	now, err := client.CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	for _, s := range now.Status.ContainerStatuses {
		assert.Zero(t, s.RestartCount, "container %s restarted", s.Name)
	}
}

// importPrometheus packs Debian's Prometheus as an image for the node.
func importPrometheus(t *testing.T, node *testcluster.Node, prometheus string) {
	t.Helper()
	files, err := testcluster.HostProgramFiles(ctx(t), prometheus)
	require.NoError(t, err)
	img, err := testcluster.FilesImage(files, []string{prometheus}, "65534:65534")
	require.NoError(t, err)
	require.NoError(t, node.ImportImage(ctx(t), img, prometheusImage))
}

// debianPrometheusVersion is the version the operator must render flags for: Debian's.
func debianPrometheusVersion(t *testing.T, prometheus string) string {
	t.Helper()
	b, err := exec.CommandContext(ctx(t), prometheus, "--version").CombinedOutput()
	require.NoError(t, err)
	out := string(b)
	// "prometheus, version 2.42.0+ds (branch: ...": the operator takes v2.42.0.
	f := strings.Fields(out)
	require.GreaterOrEqual(t, len(f), 3, out)
	v, _, _ := strings.Cut(f[2], "+")
	return "v" + v
}
