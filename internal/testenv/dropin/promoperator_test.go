package dropin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testpod"
	"github.com/configwave/configwave/internal/testenv/testvolume"
)

// The Prometheus Operator itself, built from its Go module and run against the test's control
// plane with our image as its --prometheus-config-reloader, renders the StatefulSets of a
// Prometheus, an Alertmanager and a ThanosRuler. Their init-config-reloader and config-reloader
// containers, exactly as rendered (command /bin/prometheus-config-reloader, read-only root,
// every capability dropped, 50Mi memory limit, --web-config-file from the operator's Secret,
// empty), run from our image with the volumes the operator made: the init container writes the
// config and exits; the sidecar serves /healthz on :8080 and tells the app once at start and
// again on a change.
func TestPrometheusOperatorReloaders(t *testing.T) {
	testpod.Need(t)
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	testcluster.StartPrometheusOperator(t, cluster, "configwave/reloader:test", ns)
	dyn, err := dynamic.NewForConfig(cluster.Config())
	require.NoError(t, err)
	for kind, spec := range map[string]map[string]any{
		"prometheuses":  {"replicas": 1, "serviceMonitorSelector": map[string]any{}, "web": map[string]any{}},
		"alertmanagers": {"replicas": 1},
		"thanosrulers":  {"replicas": 1, "queryEndpoints": []any{"http://127.0.0.1:10903"}},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "monitoring.coreos.com/v1", "kind": kindOf[kind],
			"metadata": map[string]any{"name": "demo", "namespace": ns}, "spec": spec}}
		_, err := dyn.Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: kind}).Namespace(ns).Create(ctx(t), u, metav1.CreateOptions{})
		require.NoError(t, err, kind)
	}
	img := testpod.Unpack(t, testpod.Layout(t), "reloader")

	t.Run("prometheus", func(t *testing.T) {
		prometheus := testcluster.NeedProgram(t, "prometheus", "prometheus")
		pod, vols := operatorPod(t, client, ns, "prometheus-demo")
		reloader, err := Container(pod.Spec, "config-reloader")
		require.NoError(t, err)
		assert.Equal(t, []string{"/bin/prometheus-config-reloader"}, reloader.Command, "the operator's own command")
		assert.Contains(t, reloader.Args, "--web-config-file=/etc/prometheus/web_config/web-config.yaml")
		assert.Equal(t, "50Mi", reloader.Resources.Limits.Memory().String())

		initC := pod.Run(t, img, "init-config-reloader")
		require.Equal(t, 0, initC.Wait(t, eventually), "the init container writes the config and exits: %s", initC.Log())
		out := filepath.Join(vols["config-out"].Dir, "prometheus.env.yaml")
		rendered, err := os.ReadFile(out)
		require.NoError(t, err, initC.Log())
		assert.Contains(t, string(rendered), "prometheus: "+ns+"/demo", "the operator's config, gunzipped")

		prom := pod.Netns.Exec(t, prometheus, "--config.file="+out, "--web.listen-address=127.0.0.1:9090", "--web.enable-lifecycle",
			"--storage.tsdb.path="+t.TempDir(), "--log.level=warn")
		waitHTTP(t, pod.Netns.Get, "127.0.0.1:9090", "/-/ready", prom)
		c := pod.Run(t, img, "config-reloader")
		waitHTTP(t, pod.Netns.Get, "127.0.0.1:8080", "/healthz", c) // plain HTTP: the web config is empty
		assert.Equal(t, "reloader-fileonly", filepath.Base(containerExe(t, c)),
			"the operator's /bin/prometheus-config-reloader with its empty web config runs the file-only build")
		require.Eventually(t, func() bool { return metric(pod, "127.0.0.1:8080", "reloader_reloads_total") == 1 }, eventually, 100*time.Millisecond,
			"Prometheus is told once at start: %s", c.Log())
		assert.EqualValues(t, 1, metric(pod, "127.0.0.1:9090", "prometheus_config_last_reload_successful"))

		vols["prometheus-demo-rulefiles-0"].add(t, ns+"-r.yaml", "groups: []\n")
		require.Eventually(t, func() bool { return metric(pod, "127.0.0.1:8080", "reloader_reloads_total") == 2 }, eventually, 100*time.Millisecond,
			"a rule change is told: %s", c.Log())
		assert.EqualValues(t, 0, metric(pod, "127.0.0.1:8080", "reloader_reloads_failed_total"))
		assert.False(t, c.Exited(), c.Log())
	})

	for _, tt := range []struct{ sts, app, path, changed string }{
		{"alertmanager-demo", "127.0.0.1:9093", "/-/reload", "config-volume"},
		{"thanos-ruler-demo", "127.0.0.1:10902", "/-/reload", "thanos-ruler-demo-rulefiles-0"},
	} {
		t.Run(tt.sts, func(t *testing.T) {
			pod, vols := operatorPod(t, client, ns, tt.sts)
			reloader, err := Container(pod.Spec, "config-reloader")
			require.NoError(t, err)
			assert.Contains(t, strings.Join(reloader.Args, " "), "--web-config-file=", "the operator always passes it here")
			if _, err := Container(pod.Spec, "init-config-reloader"); err == nil {
				initC := pod.Run(t, img, "init-config-reloader")
				require.Equal(t, 0, initC.Wait(t, eventually), initC.Log())
			}
			app := newRecordingApp(t, pod, tt.app)
			c := pod.Run(t, img, "config-reloader")
			waitHTTP(t, pod.Netns.Get, "127.0.0.1:8080", "/healthz", c)
			r := app.next(t, c) // told once at start: with --config-file as prometheus-config-reloader, and without (ThanosRuler) too
			assert.Equal(t, tt.path, r.Path)
			app.quiet(t, 500*time.Millisecond)
			vols[tt.changed].add(t, "changed.yaml", "groups: []\n")
			r = app.next(t, c)
			assert.Equal(t, "POST", r.Method)
			assert.Equal(t, tt.path, r.Path)
			assert.False(t, c.Exited(), c.Log())
		})
	}
}

var kindOf = map[string]string{"prometheuses": "Prometheus", "alertmanagers": "Alertmanager", "thanosrulers": "ThanosRuler"}

// operatorPod waits for the StatefulSet the operator renders and makes its pod: every volume
// written as kubelet writes it from the objects the operator made (ConfigMaps and Secrets
// through the atomic writer, a subPath file in place, emptyDirs empty).
func operatorPod(t *testing.T, client kubernetes.Interface, ns, name string) (*testpod.Pod, map[string]volume) {
	t.Helper()
	var sts *appsv1.StatefulSet
	err := wait.PollUntilContextTimeout(ctx(t), 200*time.Millisecond, eventually, true, func(c context.Context) (bool, error) {
		var err error
		sts, err = client.AppsV1().StatefulSets(ns).Get(c, name, metav1.GetOptions{})
		return err == nil, nil
	})
	require.NoError(t, err, "the operator made no StatefulSet %s", name)
	pod := testpod.New(t, name+"-0", ns, sts.Spec.Template.Spec)
	vols := map[string]volume{}
	for _, v := range sts.Spec.Template.Spec.Volumes {
		dir := t.TempDir()
		var data map[string][]byte
		switch {
		case v.EmptyDir != nil:
		case v.ConfigMap != nil:
			cm, err := waitFor(t, func(c context.Context) (*corev1.ConfigMap, error) {
				return client.CoreV1().ConfigMaps(ns).Get(c, v.ConfigMap.Name, metav1.GetOptions{})
			})
			require.NoError(t, err, "ConfigMap %s", v.ConfigMap.Name)
			data = map[string][]byte{}
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
		case v.Secret != nil:
			s, err := waitFor(t, func(c context.Context) (*corev1.Secret, error) {
				return client.CoreV1().Secrets(ns).Get(c, v.Secret.SecretName, metav1.GetOptions{})
			})
			require.NoError(t, err, "Secret %s", v.Secret.SecretName)
			data = s.Data
		default:
			continue // a volume no reloader mounts (Prometheus' TSDB)
		}
		vol := volume{Volume: testvolume.New(dir), files: map[string]string{}}
		if data != nil {
			for k, b := range data {
				vol.files[k] = string(b)
			}
			require.NoError(t, vol.Write(vol.files), "volume %s", v.Name)
		}
		vols[v.Name] = vol
		pod.Volume(v.Name, dir)
	}
	return pod, vols
}

// volume is a volume as kubelet wrote it, and what it holds.
type volume struct {
	*testvolume.Volume
	files map[string]string
}

// add writes the volume again with one more file, as kubelet does when its object gains a key.
func (v volume) add(t *testing.T, name, content string) {
	t.Helper()
	v.files[name] = content
	require.NoError(t, v.Write(v.files))
}

// waitFor retries get until it finds the object: the operator makes them one by one.
func waitFor[T any](t *testing.T, get func(context.Context) (T, error)) (T, error) {
	var out T
	err := wait.PollUntilContextTimeout(ctx(t), 200*time.Millisecond, eventually, true, func(c context.Context) (bool, error) {
		var err error
		out, err = get(c)
		return err == nil, nil
	})
	return out, err
}

// metric reads one series from addr's /metrics in the pod's network; -1 when absent.
func metric(pod *testpod.Pod, addr, series string) float64 {
	_, body := pod.Netns.Get(addr, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			_, _ = fmt.Sscan(v, &f)
			return f
		}
	}
	return -1
}
