package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/configwave/configwave/internal/testenv/dropin"
)

// Each peer's container, exactly as its chart renders it (internal/testenv/dropin/testdata), goes
// through that peer's translator into the reloader's own options: the table is the peers' own
// manifests, not arguments written here.
func TestPeersManifestsTranslate(t *testing.T) {
	tests := []struct {
		file, kind, workload, container string
		check                           func(t *testing.T, o options)
	}{
		{"fluent-bit-chart.yaml", "DaemonSet", "fluent-bit", "reloader", func(t *testing.T, o options) {
			assert.Equal(t, peerConfigmapReload, o.peer.name)
			assert.Equal(t, []string{"/watch/config", "/watch/scripts"}, o.folders, "one-dash flags read as Go's flag package reads them")
			assert.Equal(t, []string{"http://localhost:2020/api/v2/reload"}, o.reloadHTTP)
			assert.True(t, o.peer.foldersMustExist)
		}},
		{"prometheus-chart.yaml", "Deployment", "prometheus-server", "prometheus-server-configmap-reload", func(t *testing.T, o options) {
			assert.Equal(t, peerPrometheusConfigReloader, o.peer.name)
			assert.Equal(t, []string{"/etc/config"}, o.folders)
			assert.Equal(t, "0.0.0.0:8080", o.listenAddress, "the chart's probes' port")
			assert.Equal(t, []string{"http://127.0.0.1:9090/-/reload"}, o.reloadHTTP)
			assert.True(t, o.peer.tellOnStart, "told once at start, --config-file or not")
		}},
		{"alertmanager-chart.yaml", "StatefulSet", "alertmanager", "alertmanager-configmap-reload", func(t *testing.T, o options) {
			assert.Empty(t, o.listenAddress, "prometheus-config-reloader serves nothing without --listen-address")
			assert.Equal(t, []string{"http://127.0.0.1:9093/-/reload"}, o.reloadHTTP)
		}},
		{"alloy-chart.yaml", "DaemonSet", "alloy", "config-reloader", func(t *testing.T, o options) {
			assert.Equal(t, []string{"/etc/alloy"}, o.folders)
			assert.Equal(t, []string{"http://localhost:12345/-/reload"}, o.reloadHTTP)
			assert.Empty(t, o.peer.unverifiedLoopback, "http: nothing to leave unverified")
		}},
		{"grafana-chart.yaml", "Deployment", "grafana", "grafana-sc-dashboard", func(t *testing.T, o options) {
			assert.Equal(t, "/tmp/dashboards/general", o.configRoot)
			assert.Equal(t, "grafana_dashboard", o.selector)
			assert.Equal(t, "both", o.selectorKind)
			assert.True(t, o.peer.createRoot)
			assert.True(t, o.peer.healthPortOptional)
			assert.Equal(t, ":8080", o.listenAddress)
			assert.Equal(t, []string{"http://admin:s3cr3t@localhost:3000/api/admin/provisioning/dashboards/reload"}, o.reloadHTTP)
		}},
		{"grafana-chart-kube-prometheus-stack.yaml", "Deployment", "kube-prometheus-stack-grafana", "grafana-sc-dashboard", func(t *testing.T, o options) {
			assert.Equal(t, "grafana_dashboard=1", o.selector)
			assert.True(t, o.allNamespaces, "NAMESPACE=ALL")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file+"/"+tt.container, func(t *testing.T) {
			objs, err := dropin.Load(filepath.Join("..", "..", "internal", "testenv", "dropin", "testdata", tt.file))
			require.NoError(t, err)
			spec, err := dropin.PodSpec(objs, tt.kind, tt.workload)
			require.NoError(t, err)
			c, err := dropin.Container(spec, tt.container)
			require.NoError(t, err)
			argv0, args := "/reloader", c.Args // the image's entrypoint, unless the spec names a command
			if len(c.Command) > 0 {
				argv0, args = c.Command[0], append(c.Command[1:], c.Args...)
			}
			o, err := translateFor(t, argv0, args, envOf(c, map[string]string{"admin-user": "admin", "admin-password": "s3cr3t"}))
			require.NoError(t, err)
			tt.check(t, o)
		})
	}
}

// translateFor reads a command line and an environment as runMain does, up to the options.
func translateFor(t *testing.T, argv0 string, args []string, getenv func(string) string) (options, error) {
	t.Helper()
	sidecar, sidecarPeer, ok, err := k8sSidecarStart(args, getenv)
	if err != nil {
		return options{}, err
	}
	if ok {
		args = sidecar
	}
	cl := newCommandLine()
	if err := cl.fs.Parse(cl.args(args)); err != nil {
		return options{}, err
	}
	app, err := cl.appArgs()
	if err != nil {
		return options{}, err
	}
	o, err := cl.translate(argv0, app)
	if ok {
		o.peer = sidecarPeer
	}
	return o, err
}

// envOf is a container's environment as kubelet gives it, secretKeyRefs from secrets.
func envOf(c corev1.Container, secrets map[string]string) func(string) string {
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = secrets[e.ValueFrom.SecretKeyRef.Key]
		}
	}
	return func(k string) string { return env[k] }
}
