package dropin

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testpod"
)

// Stakater Reloader's chart, each line of it as rendered with its defaults, runs wave from our
// image with only the image changed: its ServiceAccount and RBAC exactly as rendered (no watch
// on workloads, no create on Secrets; 2.1 and earlier no create at all, 2.2 and later one on
// ConfigMaps in its namespace), its env, its probes on :9090. wave runs without an install key
// (there is none, and it may not make one): no key is kept in a ConfigMap the chart lets it
// create, and its records of Secrets carry their metadata, never their values. A change of a
// ConfigMap, then of a Secret, an annotated Deployment uses rolls it: new pods replace the old.
// Namespaced, the app lives in the chart's namespace, beside wave: the case where the view role
// there would have read a key kept in a ConfigMap.
func TestStakaterReloaderChart(t *testing.T) {
	testpod.Need(t)
	client := adminClient(t)
	img := testpod.Unpack(t, testpod.Layout(t), "wave")
	for _, tt := range []struct {
		name, file string
		namespaced bool
	}{
		{"2.2 (2.2.16), watching globally", "testdata/stakater-reloader-chart.yaml", false},
		{"2.2, namespaced", "testdata/stakater-reloader-chart-namespaced.yaml", true},
		{"2.1 (2.1.5: Reloader v1.4.5; no create at all, no RELOADER_DEPLOYMENT_NAME), watching globally", "testdata/stakater-reloader-chart-2.1.yaml", false},
		{"2.1, namespaced", "testdata/stakater-reloader-chart-2.1-namespaced.yaml", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Load(tt.file)
			require.NoError(t, err)
			applyRBAC(t, client, objs)
			spec, err := PodSpec(objs, "Deployment", "reloader-reloader")
			require.NoError(t, err)

			ns := "reloader"
			if !tt.namespaced {
				ns = testcluster.Namespace(t, client)
			}
			const secretValue = "hunter2-under-reloaders-chart"
			appWithConfigAndSecret(t, client, ns, map[string]string{"reloader.stakater.com/auto": "true"}, secretValue)
			pod := testpod.New(t, "reloader-reloader-5d8f7c9b4-x2m9q", "reloader", spec)
			pod.ServiceAccount(t, cluster, client)
			c := pod.Run(t, img, "reloader-reloader")

			ready := waitHTTP(t, pod.Netns.Get, "127.0.0.1:9090", "/metrics", c) // the chart's readiness probe
			assert.Contains(t, ready, "reloader_reload_executed_total")
			code, live := pod.Netns.Get("127.0.0.1:9090", "/live") // its liveness probe
			assert.Equal(t, 200, code, live)
			require.Eventually(t, func() bool { code, _ := pod.Netns.Get("127.0.0.1:9090", "/readyz"); return code == 200 }, eventually, 100*time.Millisecond, c.Log())
			_, detail := pod.Netns.Get("127.0.0.1:9090", "/readyz")
			where := "in every namespace"
			if tt.namespaced {
				where = "in namespace reloader"
			}
			assert.Contains(t, detail, "wave may list deployments.apps but not watch them "+where, "what the chart's RBAC lacks, said")
			assert.Contains(t, c.Log(), `records="secrets-by-metadata"`, "no key to be had: none used")
			assert.Contains(t, c.Log(), "no install key: Secret reloader/configwave-install-key is absent and wave may not create Secrets in reloader")

			rolledBy(t, client, ns, c.Log)
			rolledOnSecret(t, client, ns, c.Log)
			// The counter goes up once wave has the API server's answer to its write, which the
			// test may see first: looked at until it does.
			var metrics string
			require.Eventually(t, func() bool {
				_, metrics = pod.Netns.Get("127.0.0.1:9090", "/metrics")
				return strings.Contains(metrics, `reloader_reload_executed_total{success="true"} 2`)
			}, eventually, 100*time.Millisecond, "Reloader's counter of the two rollouts")
			assert.Contains(t, metrics, `configwave_wave_records_info{mode="secrets-by-metadata"} 1`)
			_, err = client.CoreV1().ConfigMaps("reloader").Get(ctx(t), "configwave-install-key", metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "no key kept in a ConfigMap, which the view role reads")
			_, err = client.CoreV1().Secrets("reloader").Get(ctx(t), "configwave-install-key", metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "nor made where RBAC does not allow it")
			d, err := client.AppsV1().Deployments(ns).Get(ctx(t), "app", metav1.GetOptions{})
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(d.Annotations["configwave.io/config-inputs"], "secrets=meta,"), d.Annotations["configwave.io/config-inputs"])
			assert.NotContains(t, c.Log(), secretValue)
			assert.False(t, c.Exited(), c.Log())
		})
	}
}

// appWithConfigAndSecret is appWithConfig's app in namespace ns, using a Secret as well.
func appWithConfigAndSecret(t *testing.T, client kubernetes.Interface, ns string, annotations map[string]string, secretValue string) {
	t.Helper()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-config"},
		Data: map[string]string{"LEVEL": "info"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.CoreV1().Secrets(ns).Create(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-secret"},
		StringData: map[string]string{"PASSWORD": secretValue}}, metav1.CreateOptions{})
	require.NoError(t, err)
	d := testcluster.Deployment(ns, "app", 2)
	d.Annotations = annotations
	d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-secret"}}},
	}
	_, err = client.AppsV1().Deployments(ns).Create(ctx(t), d, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, "app", time.Minute))
}

// rolledOnSecret changes the app's Secret after rolledBy and waits for a third ReplicaSet,
// complete.
func rolledOnSecret(t *testing.T, client kubernetes.Interface, ns string, waveLog func() string) {
	t.Helper()
	_, err := client.CoreV1().Secrets(ns).Patch(ctx(t), "app-secret", "application/merge-patch+json", []byte(`{"stringData":{"PASSWORD":"changed"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	waitReplicaSets(t, client, ns, 3, "the Deployment was not rolled after its Secret changed", waveLog)
	require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, "app", time.Minute))
}
