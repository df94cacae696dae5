package dropin

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testpod"
	"github.com/configwave/configwave/internal/testenv/testvolume"
)

// prometheus-community's prometheus chart runs prometheus-config-reloader with arguments only,
// from the image's entrypoint, as 65534. With the image swapped for ours, beside a real
// Prometheus in the pod: the chart's probes (/healthz on :8080) answer, and a change of the
// mounted ConfigMap is live in Prometheus.
func TestPrometheusChartConfigReloader(t *testing.T) {
	testpod.Need(t)
	prometheus := testcluster.NeedProgram(t, "prometheus", "prometheus")
	objs, err := Load("testdata/prometheus-chart.yaml")
	require.NoError(t, err)
	spec, err := PodSpec(objs, "Deployment", "prometheus-server")
	require.NoError(t, err)
	img := testpod.Unpack(t, testpod.Layout(t), "reloader")

	pod := testpod.New(t, "prometheus-server-6c9f8b7d5-q4w8z", "default", spec)
	config := testvolume.New(t.TempDir())
	promConfig := func(interval string) map[string]string {
		return map[string]string{"prometheus.yml": "global:\n  scrape_interval: " + interval + "\n", "alerting_rules.yml": "{}\n"}
	}
	require.NoError(t, config.Write(promConfig("1m")))
	pod.Volume("config-volume", config.Dir)
	prom := pod.Netns.Exec(t, prometheus, "--config.file="+filepath.Join(config.Dir, "prometheus.yml"), "--web.listen-address=127.0.0.1:9090",
		"--web.enable-lifecycle", "--storage.tsdb.path="+t.TempDir(), "--log.level=warn")
	waitHTTP(t, pod.Netns.Get, "127.0.0.1:9090", "/-/ready", prom)
	c := pod.Run(t, img, "prometheus-server-configmap-reload")

	waitHTTP(t, pod.Netns.Get, "127.0.0.1:8080", "/healthz", c) // the chart's probes
	require.NoError(t, config.Write(promConfig("17s")))
	require.Eventually(t, func() bool { return strings.Contains(runningConfig(t, pod), "scrape_interval: 17s") }, eventually, 100*time.Millisecond,
		"the new config is live in Prometheus; the reloader's log:\n%s", c.Log())
	_, metrics := pod.Netns.Get("127.0.0.1:8080", "/metrics")
	assert.Contains(t, metrics, "reloader_last_reload_successful 1", "prometheus-config-reloader's series")
	assert.False(t, c.Exited(), c.Log())
}

func runningConfig(t *testing.T, pod *testpod.Pod) string {
	_, body := pod.Netns.Get("127.0.0.1:9090", "/api/v1/status/config")
	var r struct{ Data struct{ YAML string } }
	_ = json.Unmarshal([]byte(body), &r)
	return r.Data.YAML
}

// alertmanager's and Grafana Alloy's charts run prometheus-config-reloader with --watched-dir
// and --reload-url alone (Alloy's on a read-only root with every capability dropped): with the
// image swapped for ours, a change of the mounted ConfigMap is a POST to the app's reload URL.
func TestChartsWithWatchedDirAndReloadURL(t *testing.T) {
	testpod.Need(t)
	img := testpod.Unpack(t, testpod.Layout(t), "reloader")
	for _, tt := range []struct {
		chart, kind, workload, container, volume, app, path string
	}{
		{"alertmanager", "StatefulSet", "alertmanager", "alertmanager-configmap-reload", "config", "127.0.0.1:9093", "/-/reload"},
		{"alloy", "DaemonSet", "alloy", "config-reloader", "config", "127.0.0.1:12345", "/-/reload"},
	} {
		t.Run(tt.chart, func(t *testing.T) {
			objs, err := Load("testdata/" + tt.chart + "-chart.yaml")
			require.NoError(t, err)
			spec, err := PodSpec(objs, tt.kind, tt.workload)
			require.NoError(t, err)
			pod := testpod.New(t, tt.workload+"-0", "default", spec)
			config := testvolume.New(t.TempDir())
			require.NoError(t, config.Write(map[string]string{"config": "v1\n"}))
			pod.Volume(tt.volume, config.Dir)
			app := newRecordingApp(t, pod, tt.app)
			c := pod.Run(t, img, tt.container)
			require.Eventually(t, func() bool { return strings.Contains(c.Log(), "reloader started") }, eventually, 50*time.Millisecond, c.Log())

			require.NoError(t, config.Write(map[string]string{"config": "v2\n"}))
			r := app.next(t, c)
			assert.Equal(t, "POST", r.Method)
			assert.Equal(t, tt.path, r.Path)
			assert.False(t, c.Exited(), c.Log())
		})
	}
}
