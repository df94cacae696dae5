package dropin

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/testenv/testpod"
)

// Grafana's chart with its dashboards and datasources sidecars (k8s-sidecar, configured by its
// environment alone) runs them from our image with only the image changed: as user 472, with
// the chart's ServiceAccount and RBAC, both on the default health port 8080 in one pod (the
// second finds it taken and runs on, as k8s-sidecar does), the dashboards one writing into a
// folder of its emptyDir that does not exist yet (defaultFolderName). A labelled ConfigMap
// becomes a file there, and Grafana's reload API is told, with the admin's credentials.
func TestGrafanaChartSidecars(t *testing.T) {
	testpod.Need(t)
	client := adminClient(t)
	objs, err := Load("testdata/grafana-chart.yaml")
	require.NoError(t, err)
	applyRBAC(t, client, objs)
	spec, err := PodSpec(objs, "Deployment", "grafana")
	require.NoError(t, err)
	img := testpod.Unpack(t, testpod.Layout(t), "reloader")

	pod := testpod.New(t, "grafana-7f8d9c6b5-m4n2p", "monitoring", spec)
	pod.ServiceAccount(t, cluster, client)
	pod.Secret("grafana", map[string]string{"admin-user": "admin", "admin-password": "s3cr3t-grafana"})
	dashboards, datasources := t.TempDir(), t.TempDir()
	pod.Volume("sc-dashboard-volume", dashboards)
	pod.Volume("sc-datasources-volume", datasources)
	grafana := newRecordingApp(t, pod, "127.0.0.1:3000")
	first := pod.Run(t, img, "grafana-sc-dashboard")
	require.Eventually(t, func() bool { code, _ := pod.Netns.Get("127.0.0.1:8080", "/healthz"); return code == 200 }, eventually, 50*time.Millisecond, first.Log())
	second := pod.Run(t, img, "grafana-sc-datasources")
	require.Eventually(t, func() bool { return strings.Contains(second.Log(), "the health port is taken") }, eventually, 50*time.Millisecond,
		"the second sidecar says once that it runs on without the port:\n%s", second.Log())

	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "node-dashboard", Namespace: "monitoring", Labels: map[string]string{"grafana_dashboard": "1"}}, Data: map[string]string{"node.json": `{"title":"Nodes"}`}},
		{ObjectMeta: metav1.ObjectMeta{Name: "prom-datasource", Namespace: "monitoring", Labels: map[string]string{"grafana_datasource": "1"}}, Data: map[string]string{"prom.yaml": "apiVersion: 1\n"}},
	} {
		_, err := client.CoreV1().ConfigMaps("monitoring").Create(ctx(t), cm, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	requireFile(t, filepath.Join(dashboards, "general", "node.json"), `{"title":"Nodes"}`, first)
	requireFile(t, filepath.Join(datasources, "prom.yaml"), "apiVersion: 1\n", second)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:s3cr3t-grafana"))
	for _, path := range []string{"/api/admin/provisioning/dashboards/reload", "/api/admin/provisioning/datasources/reload"} {
		require.Eventually(t, func() bool {
			for _, r := range grafana.requests() {
				if r.Path == path && r.Method == "POST" && r.Header.Get("Authorization") == auth {
					return true
				}
			}
			return false
		}, eventually, 50*time.Millisecond, "Grafana was told at %s with the admin's credentials", path)
	}
	assert.False(t, first.Exited(), first.Log())
	assert.False(t, second.Exited(), second.Log())
	for _, c := range []string{first.Log(), second.Log()} {
		assert.NotContains(t, c, "s3cr3t-grafana", "the password is never logged")
	}
}

// requireFile waits until path holds want.
func requireFile(t *testing.T, path, want string, c interface{ Log() string }) {
	t.Helper()
	require.Eventually(t, func() bool { b, err := os.ReadFile(path); return err == nil && string(b) == want }, eventually, 50*time.Millisecond,
		"%s holds the ConfigMap's key; the sidecar's log:\n%s", path, c.Log())
}
