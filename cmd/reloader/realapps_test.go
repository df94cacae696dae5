package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// promConfig is a Prometheus config whose only job carries label; "bad" gives one that
// promtool rejects.
func promConfig(label string) string {
	if label == "bad" {
		return "global:\n  scrape_interval: banana\n"
	}
	return fmt.Sprintf("global:\n  scrape_interval: 1m\n  external_labels:\n    configwave_test: %s\nscrape_configs: []\n", label)
}

// Prometheus as the app of a reloader sidecar: POST /-/reload after each change, with
// `promtool check config` as the check. The config Prometheus runs is read back from its own
// API, and its own metric says whether its last reload worked. A config promtool rejects
// never reaches Prometheus, and the reloader stays ready.
func TestRealPrometheusSidecar(t *testing.T) {
	prometheus := testcluster.NeedProgram(t, "prometheus", "prometheus")
	testcluster.NeedProgram(t, "promtool", "prometheus")
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := t.TempDir()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "prometheus", map[string]string{"prometheus.yml": promConfig("v1")}, nil), metav1.CreateOptions{})
	require.NoError(t, err)

	promAddr := testcluster.FreeAddr(t)
	p := startReloader(t, []string{"POD_NAME=prometheus-0", "POD_NAMESPACE=" + ns}, "--configmap="+ns+"/prometheus", "--configroot="+root,
		"--reload-http=http://"+promAddr+"/-/reload",
		`--validate-command=promtool check config "$CONFIG_DIR/prometheus.yml"`)
	p.WaitReady(t)
	prom := testcluster.StartProcess(t, prometheus, nil, "--config.file="+filepath.Join(root, "prometheus.yml"),
		"--web.listen-address="+promAddr, "--web.enable-lifecycle", "--storage.tsdb.path="+t.TempDir(), "--log.level=warn")
	prom.Addr = promAddr
	require.Eventually(t, func() bool { code, _ := prom.Get("/-/ready"); return code == 200 }, eventually, tick, "Prometheus did not start: %s", prom.Log())
	running := func() string { return prometheusConfig(prom) }
	assert.Contains(t, running(), "configwave_test: v1")

	patchData(t, client, ns, "prometheus", `{"data":{"prometheus.yml":`+jsonString(promConfig("v2"))+`}}`)
	require.Eventually(t, func() bool { return strings.Contains(running(), "configwave_test: v2") }, eventually, tick,
		"Prometheus runs the new config: %s", running())
	assert.EqualValues(t, 1, prom.Metric("prometheus_config_last_reload_successful"))
	// The app may show the new config a moment before the reloader has counted the telling.
	require.Eventually(t, func() bool { return p.Metric(`configwave_reloader_reloads_total{result="success"}`) == 1 }, eventually, tick,
		"one telling counted: %s", p.Log())

	patchData(t, client, ns, "prometheus", `{"data":{"prometheus.yml":`+jsonString(promConfig("bad"))+`}}`)
	require.Eventually(t, func() bool { return status(t, p).LastResult == "validation_failed" }, eventually, tick)
	assert.Contains(t, status(t, p).LastError, "promtool check config")
	podEvent(t, client, ns, "prometheus-0", "ConfigRejected", "promtool")
	assert.True(t, p.Ready(), "promtool's rejection must not take the replica out of its Service")
	assert.Contains(t, running(), "configwave_test: v2", "Prometheus keeps the last good config")
	assert.EqualValues(t, 1, prom.Metric("prometheus_config_last_reload_successful"), "Prometheus never saw the bad config")
	assert.Contains(t, readFile(root, "prometheus.yml"), "configwave_test: v2")
}

// nginx as the app of subprocess mode, with `nginx -t` as the check: a change reaches nginx
// by SIGHUP and a page shows the new content; a config nginx -t rejects never reaches it.
func TestRealNginxSubprocess(t *testing.T) {
	nginx := testcluster.NeedProgram(t, "nginx", "nginx-light")
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root, prefix := t.TempDir(), t.TempDir()
	addr := testcluster.FreeAddr(t)
	conf := func(body string) string { return nginxConfig(prefix, addr, body) }
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "nginx", map[string]string{"nginx.conf": conf("v1")}, nil), metav1.CreateOptions{})
	require.NoError(t, err)

	p := startReloader(t, nil, "--configmap="+ns+"/nginx", "--configroot="+root, "--startup-grace=500ms",
		`--validate-command=`+nginx+` -t -q -p `+prefix+` -e stderr -c "$CONFIG_DIR/nginx.conf"`,
		"--", nginx, "-p", prefix, "-e", "stderr", "-c", filepath.Join(root, "nginx.conf"), "-g", "daemon off;")
	p.WaitReady(t)
	page := func() string { _, body := (&testcluster.Process{Addr: addr}).Get("/"); return strings.TrimSpace(body) }
	require.Eventually(t, func() bool { return page() == "v1" }, eventually, tick, "nginx serves the first config: %s", p.Log())

	patchData(t, client, ns, "nginx", `{"data":{"nginx.conf":`+jsonString(conf("v2"))+`}}`)
	require.Eventually(t, func() bool { return page() == "v2" }, eventually, tick, "nginx reloaded on SIGHUP: %s", p.Log())

	patchData(t, client, ns, "nginx", `{"data":{"nginx.conf":`+jsonString(strings.Replace(conf("v3"), "listen", "lissen", 1))+`}}`)
	require.Eventually(t, func() bool { return status(t, p).LastResult == "validation_failed" }, eventually, tick)
	assert.Contains(t, p.Log(), `unknown directive \"lissen\"`, "nginx -t's own words are in the log")
	assert.Equal(t, "v2", page(), "nginx keeps serving the last good config")
	assert.True(t, p.Ready())

	p.Stop(eventually)
	assert.False(t, pageAnswers(addr), "nginx stopped with the reloader")
}

// nginxConfig serves body on addr; every path nginx writes is under prefix, so the test needs
// nothing of the machine's nginx set-up.
func nginxConfig(prefix, addr, body string) string {
	return fmt.Sprintf(`pid %[1]s/nginx.pid;
error_log stderr warn;
worker_processes 1;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  server {
    listen %[2]s;
    location / { return 200 "%[3]s\n"; }
  }
}
`, prefix, addr, body)
}

func pageAnswers(addr string) bool {
	code, _ := (&testcluster.Process{Addr: addr}).Get("/")
	return code != 0
}

// prometheusConfig is the config Prometheus runs, read back from its own API.
func prometheusConfig(prom *testcluster.Process) string {
	_, body := prom.Get("/api/v1/status/config")
	var resp struct {
		Data struct {
			YAML string `json:"yaml"`
		} `json:"data"`
	}
	_ = json.Unmarshal([]byte(body), &resp)
	return resp.Data.YAML
}

// prometheusRules names the rules Prometheus has loaded, from its own API.
func prometheusRules(prom *testcluster.Process) []string {
	_, body := prom.Get("/api/v1/rules")
	var resp struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name string `json:"name"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	_ = json.Unmarshal([]byte(body), &resp)
	var names []string
	for _, g := range resp.Data.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Name)
		}
	}
	return names
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// nginx in another container of a pod with shareProcessNamespace: true, told with
// --reload-process=nginx: the reloader finds nginx's master among its workers by name and
// sends it SIGHUP; a page shows the new content.
func TestRealNginxByProcessName(t *testing.T) {
	nginx := testcluster.NeedProgram(t, "nginx", "nginx-light")
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root, prefix := t.TempDir(), t.TempDir()
	addr := testcluster.FreeAddr(t)
	conf := func(body string) string { return nginxConfig(prefix, addr, body) }
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "nginx", map[string]string{"nginx.conf": conf("v1")}, nil), metav1.CreateOptions{})
	require.NoError(t, err)

	p := startReloader(t, nil, "--configmap="+ns+"/nginx", "--configroot="+root, "--reload-process=nginx")
	p.WaitReady(t)
	// The app's own container: nginx started by the test, not by the reloader.
	testcluster.StartProcess(t, nginx, nil, "-p", prefix, "-e", "stderr", "-c", filepath.Join(root, "nginx.conf"), "-g", "daemon off;")
	page := func() string { _, body := (&testcluster.Process{Addr: addr}).Get("/"); return strings.TrimSpace(body) }
	require.Eventually(t, func() bool { return page() == "v1" }, eventually, tick)

	patchData(t, client, ns, "nginx", `{"data":{"nginx.conf":`+jsonString(conf("v2"))+`}}`)
	require.Eventually(t, func() bool { return page() == "v2" }, eventually, tick, "nginx reloaded by name: %s", p.Log())
	// The app may show the new config a moment before the reloader has counted the telling.
	require.Eventually(t, func() bool { return p.Metric(`configwave_reloader_reloads_total{result="success"}`) == 1 }, eventually, tick,
		"one telling counted: %s", p.Log())
}
