package main

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/configwave/configwave/internal/testenv/testcerts"
	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testvolume"
)

func gzipped(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, err := w.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return b.String()
}

// operatorSetUp is what the Prometheus Operator mounts: its gzipped config in a Secret volume,
// a rules volume, and an emptyDir for the rendered config.
type operatorSetUp struct {
	configDir, rulesDir, outDir string
	config, rules               *testvolume.Volume
}

func newOperatorSetUp(t *testing.T) *operatorSetUp {
	s := &operatorSetUp{configDir: t.TempDir(), rulesDir: t.TempDir(), outDir: t.TempDir()}
	s.config, s.rules = testvolume.New(s.configDir), testvolume.New(s.rulesDir)
	s.writeConfig(t, "v1")
	s.writeRule(t, "First")
	return s
}

func (s *operatorSetUp) writeConfig(t *testing.T, label string) {
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1m\n  external_labels:\n    replica: $(POD_NAME)\n    version: %s\n    region: $(NOT_SET)\nrule_files: [%s/*.yaml]\n", label, s.rulesDir)
	require.NoError(t, s.config.Write(map[string]string{"prometheus.yaml.gz": gzipped(t, cfg)}))
}

func (s *operatorSetUp) writeRule(t *testing.T, alert string) {
	require.NoError(t, s.rules.Write(map[string]string{"rules.yaml": fmt.Sprintf("groups:\n- name: g\n  rules:\n  - alert: %s\n    expr: vector(1)\n", alert)}))
}

func (s *operatorSetUp) out() string { return filepath.Join(s.outDir, "prometheus.env.yaml") }

// args are the operator's arguments for its prometheus-config-reloader container.
func (s *operatorSetUp) args(extra ...string) []string {
	return append([]string{"--config-file=" + filepath.Join(s.configDir, "prometheus.yaml.gz"), "--config-envsubst-file=" + s.out(),
		"--watched-dir=" + s.rulesDir, "--watched-dir=" + s.configDir}, extra...)
}

// runInit runs the operator's init container: the output is written once, then it exits 0.
func (s *operatorSetUp) runInit(t *testing.T) {
	if reloaderBin == "" {
		t.Skip("needs the reloader binary; skipped in -short mode")
	}
	p := testcluster.StartProcess(t, reloaderBin, append([]string{"POD_NAME=prometheus-k8s-0"}, noAPI...),
		s.args("--watch-interval=0", "--listen-address="+testcluster.FreeAddr(t))...)
	require.Equal(t, 0, p.Wait(t, eventually), p.Log())
}

func startPrometheus(t *testing.T, config string) (*testcluster.Process, func() string, func() []string) {
	return startPrometheusWith(t, config, nil)
}

// startPrometheusWith starts Prometheus; with https set, it serves TLS as web says and is read
// with that client.
func startPrometheusWith(t *testing.T, config string, https *http.Client, extra ...string) (*testcluster.Process, func() string, func() []string) {
	prometheus := testcluster.NeedProgram(t, "prometheus", "prometheus")
	addr := testcluster.FreeAddr(t)
	prom := testcluster.StartProcess(t, prometheus, nil, append([]string{"--config.file=" + config, "--web.listen-address=" + addr, "--web.enable-lifecycle",
		"--storage.tsdb.path=" + t.TempDir(), "--log.level=warn"}, extra...)...)
	prom.Addr, prom.HTTPS = addr, https
	require.Eventually(t, func() bool { code, _ := prom.Get("/-/ready"); return code == 200 }, eventually, tick, "Prometheus did not start: %s", prom.Log())
	running := func() string { return prometheusConfig(prom) }
	alerts := func() []string { return prometheusRules(prom) }
	return prom, running, alerts
}

// prometheus-config-reloader's arguments as the Prometheus Operator renders them, against real
// Prometheus, with only the image changed: the init container writes the gunzipped config with
// $(POD_NAME) expanded; the sidecar reloads once at start, then on a config change and on a
// rule change, and reloader_* series say so.
func TestPrometheusConfigReloaderDropIn(t *testing.T) {
	s := newOperatorSetUp(t)
	s.runInit(t)
	out, err := os.ReadFile(s.out())
	require.NoError(t, err)
	assert.Contains(t, string(out), "replica: prometheus-k8s-0")
	assert.Contains(t, string(out), "region: $(NOT_SET)", "an unset variable is left as written")

	prom, running, alerts := startPrometheus(t, s.out())
	p := startFolderReloaderAt(t, []string{"POD_NAME=prometheus-k8s-0"}, "--listen-address",
		s.args("--reload-url=http://"+prom.Addr+"/-/reload")...)
	require.Eventually(t, func() bool { return p.Metric("reloader_reloads_total") == 1 }, eventually, tick, "one reload at start: %s", p.Log())
	assert.EqualValues(t, 1, p.Metric("reloader_last_reload_successful"))
	assert.EqualValues(t, 1, p.Metric(`reloader_info{method="http"}`))
	assert.EqualValues(t, 1, p.Metric("reloader_config_environment_variable_expansion_errors"))
	assert.Contains(t, running(), "replica: prometheus-k8s-0")
	assert.Equal(t, []string{"First"}, alerts())

	s.writeConfig(t, "v2")
	require.Eventually(t, func() bool { return strings.Contains(running(), "version: v2") }, eventually, tick, "the new config is live: %s", p.Log())
	s.writeRule(t, "Second")
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]string{"Second"}, alerts()) }, eventually, tick, "the new rule is live")
	require.Eventually(t, func() bool { return p.Metric("reloader_reloads_total") == 3 }, eventually, tick)
	assert.EqualValues(t, 0, p.Metric("reloader_reloads_failed_total"))
	assert.Greater(t, p.Metric("reloader_last_reload_success_timestamp_seconds"), float64(time.Now().Add(-time.Minute).Unix()))
	assert.GreaterOrEqual(t, p.Metric("reloader_config_apply_operations_total"), 2.0)
	assert.EqualValues(t, 0, p.Metric("reloader_config_apply_operations_failed_total"))
	assert.Greater(t, p.Metric("reloader_watch_events_total"), 0.0)
	assert.GreaterOrEqual(t, p.Metric("reloader_watches"), 2.0)
	code, body := p.Get("/healthz")
	assert.Equal(t, 200, code, body)
}

// --reload-method=signal: SIGHUP to the process named prometheus, and the reload confirmed
// through Prometheus' runtime info, so a config Prometheus rejects is a failed reload.
func TestPrometheusConfigReloaderSignal(t *testing.T) {
	s := newOperatorSetUp(t)
	s.runInit(t)
	prom, running, _ := startPrometheus(t, s.out())
	p := startFolderReloaderAt(t, []string{"POD_NAME=prometheus-k8s-0"}, "--listen-address",
		s.args("--reload-method=signal", "--runtimeinfo-url=http://"+prom.Addr+"/api/v1/status/runtimeinfo")...)
	require.Eventually(t, func() bool { return p.Metric("reloader_reloads_total") == 1 }, eventually, tick, "one reload at start: %s", p.Log())
	assert.EqualValues(t, 1, p.Metric(`reloader_info{method="signal"}`))

	s.writeConfig(t, "v2")
	require.Eventually(t, func() bool { return strings.Contains(running(), "version: v2") }, eventually, tick, "SIGHUP reloaded it: %s", p.Log())
	require.Eventually(t, func() bool { return p.Metric("reloader_reloads_total") == 2 }, eventually, tick)
	assert.EqualValues(t, 1, p.Metric("reloader_last_reload_successful"))

	require.NoError(t, s.config.Write(map[string]string{"prometheus.yaml.gz": gzipped(t, "global:\n  scrape_interval: banana\n")}))
	require.Eventually(t, func() bool { return p.Metric("reloader_last_reload_successful") == 0 }, eventually, tick,
		"Prometheus rejected it, and the runtime info says so: %s", p.Log())
	assert.GreaterOrEqual(t, p.Metric("reloader_reloads_failed_total"), 1.0)
	assert.Contains(t, running(), "version: v2", "Prometheus keeps its last good config")
	assert.True(t, p.Ready())
}

// Prometheus serving TLS and asking for a client certificate, told over https by the operator's
// arguments. Without our TLS flags the certificate of https://localhost is not checked, as
// prometheus-config-reloader never checks it: the request gets as far as Prometheus asking for
// a client certificate, and the error says which flags to add. With them, the reloader checks
// Prometheus' certificate against the CA file and shows its own: the reload and a rule change
// go through.
func TestPrometheusConfigReloaderOverTLS(t *testing.T) {
	s := newOperatorSetUp(t)
	s.runInit(t)
	dir := t.TempDir()
	server, client := certPair(t, "localhost"), certPair(t, "reloader")
	files := map[string]string{"server.crt": server["tls.crt"], "server.key": server["tls.key"], "client.crt": client["tls.crt"], "client.key": client["tls.key"]}
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	at := func(name string) string { return filepath.Join(dir, name) }
	web := fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: %s\n",
		at("server.crt"), at("server.key"), at("client.crt"))
	require.NoError(t, os.WriteFile(at("web.yml"), []byte(web), 0o600))
	pair, err := tls.X509KeyPair([]byte(client["tls.crt"]), []byte(client["tls.key"]))
	require.NoError(t, err)
	https := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{pair}}}} //nolint:gosec // the test reads its own Prometheus
	prom, _, alerts := startPrometheusWith(t, s.out(), https, "--web.config.file="+at("web.yml"))
	_, port, err := net.SplitHostPort(prom.Addr)
	require.NoError(t, err)
	reloadURL := "--reload-url=https://localhost:" + port + "/-/reload"

	bare := startFolderReloaderAt(t, []string{"POD_NAME=prometheus-k8s-0"}, "--listen-address", s.args(reloadURL, "--reload-http-tries=1")...)
	require.Eventually(t, func() bool { return bare.Metric("reloader_reloads_failed_total") >= 1 }, eventually, tick, "Prometheus wants a client certificate: %s", bare.Log())
	assert.EqualValues(t, 0, bare.Metric("reloader_last_reload_successful"))
	assert.Contains(t, bare.Log(), "its certificate is not verified, as prometheus-config-reloader never verifies it", "said once at start")
	assert.Contains(t, bare.Log(), "pass --reload-http-cert-file and --reload-http-key-file", "the server's certificate was accepted; the error says what to add")
	bare.Stop(5 * time.Second)

	p := startFolderReloaderAt(t, []string{"POD_NAME=prometheus-k8s-0"}, "--listen-address", s.args(reloadURL,
		"--reload-http-ca-file="+at("server.crt"), "--reload-http-cert-file="+at("client.crt"), "--reload-http-key-file="+at("client.key"))...)
	require.Eventually(t, func() bool { return p.Metric("reloader_reloads_total") == 1 }, eventually, tick, "one reload at start: %s", p.Log())
	assert.EqualValues(t, 1, p.Metric("reloader_last_reload_successful"))
	assert.NotContains(t, p.Log(), "not verified")
	s.writeRule(t, "OverTLS")
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]string{"OverTLS"}, alerts()) }, eventually, tick, "the new rule is live: %s", p.Log())
}

// --web-config-file as exporter-toolkit reads it, with TLS and a client certificate asked for
// and basic auth: the listener serves only HTTPS with that certificate, wants the user, and
// refuses a client without a certificate; the probes of a pod reach it as the file says.
func TestWebConfigFileTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "web-ca")
	cert, key := ca.Server(t, "localhost")
	clientCert, clientKey := ca.Client(t, "prober")
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cr3t-probe"), bcrypt.MinCost)
	require.NoError(t, err)
	for name, content := range map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": ca.PEM,
		"web.yaml": []byte(fmt.Sprintf("tls_server_config:\n  cert_file: %[1]s/tls.crt\n  key_file: %[1]s/tls.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: %[1]s/ca.crt\nbasic_auth_users:\n  probe: %[2]s\n", dir, hash))} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), content, 0o600))
	}
	rules := testvolume.New(t.TempDir())
	require.NoError(t, rules.Write(map[string]string{"r.yaml": "groups: []\n"}))
	if reloaderBin == "" {
		t.Skip("needs the reloader binary; skipped in -short mode")
	}
	addr := testcluster.FreeAddr(t)
	p := testcluster.StartProcess(t, reloaderBin, noAPI, "--listen-address="+addr, "--web-config-file="+filepath.Join(dir, "web.yaml"),
		"--watched-dir="+rules.Dir, "--reload-url=http://127.0.0.1:1/-/reload")
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca.PEM))
	pair, err := tls.X509KeyPair(clientCert, clientKey)
	require.NoError(t, err)
	get := func(certs []tls.Certificate, user string) (int, error) {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", Certificates: certs}}}
		req, _ := http.NewRequest("GET", "https://"+addr+"/healthz", nil)
		if user != "" {
			req.SetBasicAuth(user, "s3cr3t-probe")
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	require.Eventually(t, func() bool { code, _ := get([]tls.Certificate{pair}, "probe"); return code == 200 }, eventually, tick, p.Log())
	code, err := get([]tls.Certificate{pair}, "")
	require.NoError(t, err)
	assert.Equal(t, 401, code, "basic auth is asked for")
	_, err = get(nil, "probe")
	assert.Error(t, err, "a client without a certificate is refused")
	resp, err := http.Get("http://" + addr + "/healthz")
	if err == nil {
		resp.Body.Close()
		assert.Equal(t, 400, resp.StatusCode, "plain HTTP to a TLS listener")
	}
	assert.NotContains(t, p.Log(), "s3cr3t-probe")
}
