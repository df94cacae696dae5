package dropin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/testenv/testpod"
)

// Wave's chart, rendered with its defaults, runs wave from our image with only the image
// changed: its ServiceAccount and RBAC exactly as rendered (nothing on CronJobs, no create on
// Secrets or ConfigMaps, every verb on Leases), its arguments, as user 1000. wave runs without
// an install key (there is none, and it may not make one): no key is kept in a Lease, which the
// chart would let it create. A change of a ConfigMap a Deployment annotated for Wave uses rolls
// it: new pods replace the old.
func TestWaveChart(t *testing.T) {
	testpod.Need(t)
	client := adminClient(t)
	objs, err := Load("testdata/wave-chart.yaml")
	require.NoError(t, err)
	objs = withNamespace(objs, "wave") // helm install --namespace wave
	applyRBAC(t, client, objs)
	spec, err := PodSpec(objs, "Deployment", "wave-wave")
	require.NoError(t, err)
	img := testpod.Unpack(t, testpod.Layout(t), "wave")

	ns, _ := appWithConfig(t, client, map[string]string{"wave.pusher.com/update-on-config-change": "true"})
	pod := testpod.New(t, "wave-wave-7b9c5d4f8-k2x8z", "wave", spec)
	pod.ServiceAccount(t, cluster, client)
	c := pod.Run(t, img, "wave-wave")

	// Wave's chart has no probe; wave's own endpoints answer where Wave's metrics were (:8080).
	waitHTTP(t, pod.Netns.Get, "127.0.0.1:8080", "/readyz", c)
	_, detail := pod.Netns.Get("127.0.0.1:8080", "/readyz")
	assert.Contains(t, detail, "wave may not list cronjobs.batch in every namespace", "what the chart's RBAC lacks, said")
	assert.Contains(t, c.Log(), `records="secrets-by-metadata"`, "no key to be had: none used")

	rolledBy(t, client, ns, c.Log)
	_, err = client.CoordinationV1().Leases("wave").Get(ctx(t), "configwave-install-key", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no key kept in a Lease, which the view role reads")
	assert.False(t, c.Exited(), c.Log())
}
