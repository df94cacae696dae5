package dropin

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testpod"
)

// Our own chart with config revisions, as users install it: `helm install` with
// revisions.enabled=true and revisions.webhook.makeCertificate=true, wave from our image on the
// real node. wave makes the webhook's certificate and keeps the registration's caBundle at its
// CA; the API server calls the webhook through the chart's Service (at its endpoints, as a
// cluster without kube-proxy on its control plane does); a Deployment opted in rolls once, a
// change rolls again, and after `kubectl rollout undo` the undone pod reads the old config from
// the files kubelet mounted, while the ConfigMap holds the new one.
func TestOurChartWithRevisionsOnARealNode(t *testing.T) {
	c := testcluster.Need(t, cluster)
	node := testcluster.NeedNode(t, c)
	client := adminClient(t)
	layout := testpod.Layout(t)
	require.NoError(t, node.ImportLayoutImage(ctx(t), layout, "wave", ourWaveImage))
	node.ScheduleHereOnly(t, client)

	app := testcluster.Namespace(t, client)
	release := testcluster.Namespace(t, client)
	// Gone before the next test: its wave (every namespace, Wave's annotations too) must not
	// find this one's Deployment in a namespace still terminating.
	t.Cleanup(func() { deleteNamespace(t, client, app) })
	repo, tag, _ := strings.Cut(ourWaveImage, ":")
	helmInstall(t, c, "cw", release, "--set", "image.repository="+repo, "--set", "image.tag="+tag,
		"--set", "revisions.enabled=true", "--set", "revisions.webhook.makeCertificate=true",
		"--set", "namespaces={"+app+"}") // this test's workloads only: the package's other tests run their own waves
	waveLog := func() string {
		return testcluster.DescribePods(context.Background(), client, release) + logsOf(client, release)
	}
	if err := testcluster.WaitDeploymentComplete(ctx(t), client, release, "cw-wave", 3*time.Minute); err != nil {
		t.Fatalf("the chart's wave never became available: %v\n%s", err, waveLog())
	}
	err := wait.PollUntilContextTimeout(ctx(t), 200*time.Millisecond, time.Minute, true, func(c context.Context) (bool, error) {
		reg, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(c, "cw-wave-revisions", metav1.GetOptions{})
		return err == nil && len(reg.Webhooks) == 1 && len(reg.Webhooks[0].ClientConfig.CABundle) > 0, nil
	})
	require.NoError(t, err, "wave never put its CA in the registration's caBundle:\n%s", waveLog())

	_, err = client.CoreV1().ConfigMaps(app).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config"},
		Data: map[string]string{"GREETING": "v1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	d := testcluster.Deployment(app, "web", 1)
	d.Annotations = map[string]string{"wave.pusher.com/update-on-config-change": "true", "configwave.io/revisions": "true"}
	grace := int64(1)
	d.Spec.Template.Spec = corev1.PodSpec{
		TerminationGracePeriodSeconds: &grace, AutomountServiceAccountToken: new(bool),
		Containers: []corev1.Container{{Name: "app", Image: testcluster.PauseImage, ImagePullPolicy: corev1.PullNever,
			VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/conf"}}}},
		Volumes: []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}}},
	}
	testcluster.OnRealNode(&d.Spec.Template.Spec)
	_, err = client.AppsV1().Deployments(app).Create(ctx(t), d, metav1.CreateOptions{})
	require.NoError(t, err)

	// reads waits for the one ready pod of the Deployment's current revision, and returns the
	// ConfigMap its volume names and what kubelet mounted in it.
	reads := func(why string) (revision, configMap, greeting string) {
		t.Helper()
		var d *appsv1.Deployment
		err := wait.PollUntilContextTimeout(ctx(t), 200*time.Millisecond, 2*time.Minute, true, func(c context.Context) (bool, error) {
			var err error
			d, err = client.AppsV1().Deployments(app).Get(c, "web", metav1.GetOptions{})
			return err == nil && strings.HasPrefix(d.Spec.Template.Annotations["configwave.io/config-inputs-hash"], "rev-"), nil
		})
		require.NoError(t, err, "%s: the Deployment names no revision:\n%s", why, waveLog())
		require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, app, "web", 2*time.Minute), why)
		rev := d.Spec.Template.Annotations["configwave.io/config-inputs-hash"]
		var pod corev1.Pod
		err = wait.PollUntilContextTimeout(ctx(t), 200*time.Millisecond, 2*time.Minute, true, func(c context.Context) (bool, error) {
			pods, err := client.CoreV1().Pods(app).List(c, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return false, nil
			}
			n := 0
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && p.Annotations["configwave.io/config-inputs-hash"] == rev && testcluster.PodReady(p) {
					pod, n = p, n+1
				}
			}
			return n == 1, nil
		})
		require.NoError(t, err, "%s: no one ready pod of revision %s:\n%s", why, rev, testcluster.DescribePods(ctx(t), client, app))
		assert.Equal(t, node.Name, pod.Spec.NodeName)
		b, err := os.ReadFile(filepath.Join(node.PodVolumeDir(pod.UID, "conf"), "GREETING"))
		require.NoError(t, err, why)
		return rev, pod.Spec.Volumes[0].ConfigMap.Name, string(b)
	}

	v1, v1Snapshot, greeting := reads("turned on")
	assert.NotEqual(t, "app-config", v1Snapshot, "the API server called the webhook through the chart's Service, which named the snapshot")
	assert.Equal(t, "v1", greeting)

	_, err = client.CoreV1().ConfigMaps(app).Patch(ctx(t), "app-config", "application/merge-patch+json", []byte(`{"data":{"GREETING":"v2"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(ctx(t), 200*time.Millisecond, time.Minute, true, func(c context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments(app).Get(c, "web", metav1.GetOptions{})
		return err == nil && d.Spec.Template.Annotations["configwave.io/config-inputs-hash"] != v1, nil
	})
	require.NoError(t, err, "the change never rolled:\n%s", waveLog())
	_, v2Snapshot, greeting := reads("v2")
	assert.NotEqual(t, v1Snapshot, v2Snapshot)
	assert.Equal(t, "v2", greeting)

	require.NoError(t, testcluster.RolloutUndo(ctx(t), client, app, "web"))
	undone, snapshot, greeting := reads("undone")
	assert.Equal(t, v1, undone)
	assert.Equal(t, v1Snapshot, snapshot, "the undone pod reads v1's snapshot")
	assert.Equal(t, "v1", greeting, "from the file kubelet mounted, while the ConfigMap holds v2")
	cm, err := client.CoreV1().ConfigMaps(app).Get(ctx(t), "app-config", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "v2", cm.Data["GREETING"])

	// wave holds the undo: it says so, and leaves the template at v1.
	err = wait.PollUntilContextTimeout(ctx(t), 200*time.Millisecond, time.Minute, true, func(c context.Context) (bool, error) {
		evs, err := client.CoreV1().Events(app).List(c, metav1.ListOptions{FieldSelector: "reason=ConfigRolledBack"})
		return err == nil && len(evs.Items) > 0, nil
	})
	require.NoError(t, err, "wave never said it holds the undo:\n%s", waveLog())
	time.Sleep(3 * time.Second)
	d, err = client.AppsV1().Deployments(app).Get(ctx(t), "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, v1, d.Spec.Template.Annotations["configwave.io/config-inputs-hash"], "wave rolled the undo forward")
}

// helmInstall is `helm install NAME ./charts/configwave --namespace NS ARGS...` against the
// test cluster, with `helm uninstall` when the test ends (the chart's cluster-wide objects
// with it).
func helmInstall(t *testing.T, c *testcluster.Cluster, name, ns string, args ...string) {
	t.Helper()
	home := t.TempDir()
	helm := func(args ...string) ([]byte, error) {
		cmd := exec.Command(testcluster.Helm(t), append(args, "--kubeconfig", c.Kubeconfig(), "--namespace", ns)...)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
			"HELM_DATA_HOME="+filepath.Join(home, "data"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.Bytes(), err
	}
	chart, err := filepath.Abs(filepath.Join("..", "..", "..", "charts", "configwave")) // from this package's folder
	require.NoError(t, err)
	// Uninstalled even when the install fails half-way: its cluster-wide objects (the
	// ClusterRoles, the webhook's registration, the policies) must not outlive the test.
	t.Cleanup(func() {
		if out, err := helm("uninstall", name, "--wait", "--timeout", "2m", "--ignore-not-found"); err != nil {
			t.Errorf("helm uninstall: %v: %s", err, out)
		}
	})
	out, err := helm(append([]string{"install", name, chart}, args...)...)
	require.NoError(t, err, "helm install: %s", out)
}

// logsOf is every container log of the namespace's pods, for a failure's message.
func logsOf(client kubernetes.Interface, ns string) string {
	pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		b.WriteString("\n--- log of pod " + p.Name + ":\n" + podLog(client, p)())
	}
	return b.String()
}
