package dropin

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testpod"
)

// The images the real node runs, imported without a registry.
const (
	ourImage        = "localhost/configwave:node"
	prometheusImage = "localhost/prometheus:node"
)

// prometheus-community's prometheus chart, as it renders, on a real node: kubelet mounts the
// ConfigMap, runs Prometheus (Debian's) and our image in the reloader's place, and probes
// them. `kubectl patch` of the ConfigMap → kubelet's swap of the mounted files → the reloader's
// reload request → Prometheus serves the new config, end to end, nothing imitated.
func TestPrometheusChartOnARealNode(t *testing.T) {
	c := testcluster.Need(t, cluster)
	testpod.Need(t)
	prometheus := testcluster.NeedProgram(t, "prometheus", "prometheus")
	node := testcluster.NeedNode(t, c)
	layout := testpod.Layout(t) // built once per test binary: no part of the test's own time
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := kubernetes.NewForConfigOrDie(c.Config())

	require.NoError(t, node.ImportLayoutImage(ctx, layout, "reloader", ourImage))
	importPrometheus(t, node, prometheus)

	objs, err := Load("testdata/prometheus-chart.yaml")
	require.NoError(t, err)
	spec, err := PodSpec(objs, "Deployment", "prometheus-server")
	require.NoError(t, err)
	for i, ctr := range spec.Containers { // only image: changes
		spec.Containers[i].Image = map[bool]string{true: ourImage, false: prometheusImage}[ctr.Name == "prometheus-server-configmap-reload"]
	}

	ns := c.Namespace(t, client)
	node.ScheduleHereOnly(t, client)
	promConfig := func(interval string) map[string]string {
		return map[string]string{"prometheus.yml": "global:\n  scrape_interval: " + interval + "\n", "alerting_rules.yml": "{}\n"}
	}
	_, err = client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-server"}, Data: promConfig("1m")}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-server"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	storageFor(t, ctx, client, ns, "prometheus-server")
	labels := map[string]string{"app.kubernetes.io/name": "prometheus", "app.kubernetes.io/component": "server"}
	_, err = client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-server", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	var pod corev1.Pod
	started := assert.Eventually(t, func() bool {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
			return false
		}
		pod = pods.Items[0]
		return pod.Spec.NodeName == node.Name && ready(pod, "prometheus-server-configmap-reload")
	}, 2*time.Minute, 200*time.Millisecond, "the pod did not start on the real node with the reloader ready (the chart's probes)")
	if !started {
		t.Fatal(testcluster.DescribePods(ctx, client, ns))
	}
	prom := "http://" + pod.Status.PodIP + ":9090"
	require.Eventually(t, func() bool { return get(prom+"/-/ready") != "" }, time.Minute, 200*time.Millisecond, "Prometheus never became ready")
	require.Contains(t, servedConfig(prom), "scrape_interval: 1m")

	patched := time.Now()
	patch, _ := json.Marshal(map[string]any{"data": promConfig("17s")})
	_, err = client.CoreV1().ConfigMaps(ns).Patch(ctx, "prometheus-server", types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(servedConfig(prom), "scrape_interval: 17s") }, time.Minute, 50*time.Millisecond,
		"Prometheus never served the patched config")
	t.Logf("ConfigMap patch → Prometheus serving the new config: %s (kubelet's sync period 1 s)", time.Since(patched).Round(time.Millisecond))
	assert.Contains(t, get("http://"+pod.Status.PodIP+":8080/metrics"), "reloader_last_reload_successful 1", "prometheus-config-reloader's series")
}

// storageFor binds the chart's PersistentVolumeClaim to a host folder, as a cluster's
// provisioner would bind it to a disk.
func storageFor(t *testing.T, ctx context.Context, client kubernetes.Interface, ns, claim string) {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o777)) // fsGroup does not apply to a hostPath volume
	size := resource.MustParse("1Gi")
	pvName := ns + "-" + claim
	_, err := client.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
			ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: claim},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = client.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
	})
	empty := ""
	_, err = client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			StorageClassName: &empty,
			VolumeName:       pvName,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func ready(p corev1.Pod, container string) bool {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			return s.Ready
		}
	}
	return false
}

// get returns the body of a 200 answer, or "".
func get(url string) string {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(b)
}

func servedConfig(prom string) string {
	var r struct{ Data struct{ YAML string } }
	_ = json.Unmarshal([]byte(get(prom+"/api/v1/status/config")), &r)
	return r.Data.YAML
}
