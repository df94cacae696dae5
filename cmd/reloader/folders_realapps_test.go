package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/testenv/testcerts"
	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testvolume"
)

// Prometheus with its config and its rules in two mounted volumes, told as configmap-reload
// tells it, with promtool as the check: a rule changed by a ..data swap is live in Prometheus;
// a rule promtool rejects never reaches it, and the reloader stays ready.
func TestRealPrometheusOnMountedVolumes(t *testing.T) {
	promtool := testcluster.NeedProgram(t, "promtool", "prometheus")
	configDir, rulesDir := t.TempDir(), t.TempDir()
	config, rules := testvolume.New(configDir), testvolume.New(rulesDir)
	require.NoError(t, config.Write(map[string]string{"prometheus.yml": "global:\n  scrape_interval: 1m\nrule_files: [" + rulesDir + "/*.yml]\n"}))
	rule := func(alert, expr string) map[string]string {
		return map[string]string{"alerts.yml": fmt.Sprintf("groups:\n- name: g\n  rules:\n  - alert: %s\n    expr: %s\n", alert, expr)}
	}
	require.NoError(t, rules.Write(rule("First", "vector(1)")))

	prom, _, alerts := startPrometheus(t, filepath.Join(configDir, "prometheus.yml"))
	p := startFolderReloader(t, nil, "--volume-dir="+configDir, "--volume-dir="+rulesDir, "--webhook-url=http://"+prom.Addr+"/-/reload",
		"--validate-command="+promtool+" check config "+filepath.Join(configDir, "prometheus.yml"))
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]string{"First"}, alerts()) }, eventually, tick)

	require.NoError(t, rules.Write(rule("Second", "vector(2)")))
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]string{"Second"}, alerts()) }, eventually, tick,
		"the new rule is live in Prometheus: %v\n%s", alerts(), p.Log())
	assert.EqualValues(t, 1, prom.Metric("prometheus_config_last_reload_successful"))

	require.NoError(t, rules.Write(rule("Broken", "vector(")))
	require.Eventually(t, func() bool { return p.Metric(`configwave_reloader_reloads_total{result="validation_failed"}`) == 1 }, eventually, tick)
	assert.True(t, failingButReady(p))
	assert.Equal(t, []string{"Second"}, alerts(), "Prometheus was not told of a rule promtool rejects")
	assert.EqualValues(t, 1, prom.Metric("prometheus_config_last_reload_successful"))
}

// nginx serving TLS from a Secret volume, in subprocess mode with `nginx -t` as the check: a
// certificate rotated by a ..data swap is the one nginx serves next.
func TestRealNginxTLSRotation(t *testing.T) {
	nginx := testcluster.NeedProgram(t, "nginx", "nginx-light")
	tlsDir, prefix := t.TempDir(), t.TempDir()
	secret := testvolume.New(tlsDir)
	require.NoError(t, secret.Write(certPair(t, "first.example")))
	addr := testcluster.FreeAddr(t)
	conf := filepath.Join(prefix, "nginx.conf")
	require.NoError(t, os.WriteFile(conf, []byte(strings.Replace(nginxConfig(prefix, addr, "tls"), "listen "+addr+";",
		"listen "+addr+" ssl;\n    ssl_certificate "+tlsDir+"/tls.crt;\n    ssl_certificate_key "+tlsDir+"/tls.key;", 1)), 0o644))

	p := startFolderReloader(t, nil, "--volume-dir="+tlsDir, "--startup-grace=500ms",
		"--validate-command="+nginx+" -t -q -p "+prefix+" -e stderr -c "+conf,
		"--", nginx, "-p", prefix, "-e", "stderr", "-c", conf, "-g", "daemon off;")
	served := func() string {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test reads which certificate is served
		if err != nil {
			return "<" + err.Error() + ">"
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	require.Eventually(t, func() bool { return served() == "first.example" }, eventually, tick, "nginx serves the first certificate: %s", p.Log())

	require.NoError(t, secret.Write(certPair(t, "second.example")))
	require.Eventually(t, func() bool { return served() == "second.example" }, eventually, tick, "nginx serves the rotated certificate: %s", p.Log())
	// The app may show the new config a moment before the reloader has counted the telling.
	require.Eventually(t, func() bool { return p.Metric(`configwave_reloader_reloads_total{result="success"}`) == 1 }, eventually, tick,
		"one telling counted: %s", p.Log())
	assert.NotContains(t, p.Log(), "PRIVATE KEY", "no key material in the log")
}

// certPair is a Secret of type kubernetes.io/tls as a volume holds it: tls.crt and tls.key,
// self-signed for the DNS name cn.
func certPair(t *testing.T, cn string) map[string]string {
	cert, key := testcerts.SelfSigned(t, cn)
	return map[string]string{"tls.crt": string(cert), "tls.key": string(key)}
}
