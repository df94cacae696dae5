package dropin

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testpod"
)

const ourWaveImage = "localhost/configwave-wave:node"

// Stakater Reloader's chart and Wave's, installed as their users install them, on a real node:
// the chart's Deployment created as rendered with only image: changed to ours. kubelet runs it
// as the chart's user, under the chart's ServiceAccount, with the token it mounts; the API
// server is reached through the kubernetes Service, as in any cluster (the pod spec says
// nothing of it); kubelet sends the chart's probes, and the pod is Ready only once they pass. A
// change of a ConfigMap an annotated Deployment uses rolls it, and the new pods really run.
func TestReloaderAndWaveChartsOnARealNode(t *testing.T) {
	c := testcluster.Need(t, cluster)
	node := testcluster.NeedNode(t, c)
	client := adminClient(t)
	layout := testpod.Layout(t) // built once per test binary, before the import's own time starts
	require.NoError(t, node.ImportLayoutImage(ctx(t), layout, "wave", ourWaveImage))
	node.ScheduleHereOnly(t, client)
	for _, chart := range []struct {
		name, file, namespace, deployment string
		optIn                             map[string]string
		logSays                           string
	}{
		{"Stakater Reloader", "testdata/stakater-reloader-chart.yaml", "", "reloader-reloader",
			map[string]string{"reloader.stakater.com/auto": "true"}, `records="secrets-by-metadata"`},
		{"Wave", "testdata/wave-chart.yaml", "wave", "wave-wave",
			map[string]string{"wave.pusher.com/update-on-config-change": "true"}, `records="secrets-by-metadata"`},
	} {
		t.Run(chart.name, func(t *testing.T) {
			objs, err := Load(chart.file)
			require.NoError(t, err)
			if chart.namespace != "" {
				objs = withNamespace(objs, chart.namespace) // helm install --namespace
			}
			applyRBAC(t, client, objs)
			// The app first: under Stakater Reloader's RBAC wave may list workloads but not
			// watch them, and finds a new one only at its next list (a change, or a minute).
			ns, _ := appWithConfigImage(t, client, chart.optIn, testcluster.PauseImage)
			d := chartDeployment(t, objs, chart.deployment)
			for i := range d.Spec.Template.Spec.Containers { // only image: changes
				d.Spec.Template.Spec.Containers[i].Image = ourWaveImage
			}
			_, err = client.AppsV1().Deployments(d.Namespace).Create(ctx(t), d, metav1.CreateOptions{})
			require.NoError(t, err)
			t.Cleanup(func() {
				_ = client.AppsV1().Deployments(d.Namespace).Delete(context.Background(), d.Name, metav1.DeleteOptions{})
			})
			if err := testcluster.WaitDeploymentComplete(ctx(t), client, d.Namespace, d.Name, 2*time.Minute); err != nil {
				t.Fatalf("the chart's Deployment %s/%s never became available with the chart's probes: %v\n%s", d.Namespace, d.Name, err,
					testcluster.DescribePods(ctx(t), client, d.Namespace))
			}
			pod := runningPod(t, client, d)
			assert.Equal(t, node.Name, pod.Spec.NodeName, "wave runs on the real node")
			waveLog := podLog(client, pod)

			rolledBy(t, client, ns, waveLog)
			assert.Contains(t, waveLog(), chart.logSays, "no key to be had under the chart's RBAC: none used, none kept elsewhere")
			now, err := client.CoreV1().Pods(pod.Namespace).Get(ctx(t), pod.Name, metav1.GetOptions{})
			require.NoError(t, err)
			for _, s := range now.Status.ContainerStatuses {
				assert.Zero(t, s.RestartCount, "container %s of wave's pod restarted: %s", s.Name, waveLog())
			}
		})
	}
}

// chartDeployment is the chart's Deployment of that name, as rendered.
func chartDeployment(t *testing.T, objs []runtime.Object, name string) *appsv1.Deployment {
	t.Helper()
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok && d.Name == name {
			return d.DeepCopy()
		}
	}
	t.Fatalf("the chart renders no Deployment %s", name)
	return nil
}

// runningPod is the Deployment's one pod that is not being deleted.
func runningPod(t *testing.T, client kubernetes.Interface, d *appsv1.Deployment) corev1.Pod {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	require.NoError(t, err)
	pods, err := client.CoreV1().Pods(d.Namespace).List(ctx(t), metav1.ListOptions{LabelSelector: sel.String()})
	require.NoError(t, err)
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			return p
		}
	}
	t.Fatalf("no pod of Deployment %s/%s", d.Namespace, d.Name)
	return corev1.Pod{}
}

// podLog reads the pod's log through the API server, from kubelet, as kubectl logs does.
func podLog(client kubernetes.Interface, pod corev1.Pod) func() string {
	return func() string {
		b, err := client.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
		if err != nil {
			return "(its log could not be read: " + err.Error() + ")"
		}
		return string(b)
	}
}
