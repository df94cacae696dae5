package peers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/testpod"
)

// Stakater Reloader's chart, rendered with its defaults, runs wave from our image with only the
// image changed: its ServiceAccount and RBAC exactly as rendered (no watch on workloads, no
// create on Secrets), its env, its probes on :9090. A change of a ConfigMap an annotated
// Deployment uses rolls it: new pods replace the old.
func TestStakaterReloaderChart(t *testing.T) {
	testpod.Need(t)
	client := adminClient(t)
	objs, err := Load("testdata/stakater-reloader-chart.yaml")
	require.NoError(t, err)
	applyRBAC(t, client, objs)
	spec, err := PodSpec(objs, "Deployment", "reloader-reloader")
	require.NoError(t, err)
	img := testpod.Unpack(t, testpod.Layout(t), "wave")

	ns, _ := appWithConfig(t, client, map[string]string{"reloader.stakater.com/auto": "true"})
	pod := testpod.New(t, "reloader-reloader-5d8f7c9b4-x2m9q", "reloader", spec)
	pod.ServiceAccount(t, cluster, client)
	c := pod.Run(t, img, "reloader-reloader")

	ready := waitHTTP(t, pod.Netns.Get, "127.0.0.1:9090", "/metrics", c) // the chart's readiness probe
	assert.Contains(t, ready, "reloader_reload_executed_total")
	code, live := pod.Netns.Get("127.0.0.1:9090", "/live") // its liveness probe
	assert.Equal(t, 200, code, live)
	require.Eventually(t, func() bool { code, _ := pod.Netns.Get("127.0.0.1:9090", "/readyz"); return code == 200 }, eventually, 100*time.Millisecond, c.Log())
	_, detail := pod.Netns.Get("127.0.0.1:9090", "/readyz")
	assert.Contains(t, detail, "wave may list deployments.apps but not watch them in every namespace", "what the chart's RBAC lacks, said")
	assert.Contains(t, c.Log(), "the install key lives in a ConfigMap", "kept keyed without create on Secrets")

	rolledBy(t, client, ns, c.Log)
	_, metrics := pod.Netns.Get("127.0.0.1:9090", "/metrics")
	assert.Contains(t, metrics, `reloader_reload_executed_total{success="true"} 1`)
	_, err = client.CoreV1().ConfigMaps("reloader").Get(ctx(t), "configwave-install-key", metav1.GetOptions{})
	assert.NoError(t, err, "the install key, in the chart's namespace")
	assert.False(t, c.Exited(), c.Log())
}
