package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testpod"
)

// On a real node, from our image: API mode with the service-account token kubelet mounts, the
// kubernetes Service kubelet names in the pod's environment, and only the Role
// config/reloader-rbac ships, subprocess mode as the container's entrypoint. A
// ConfigMap change is unpacked and then signalled to the child; deleting the pod sends kubelet's
// SIGTERM to the reloader, which forwards it to the child, and the pod ends long before its
// grace period would have it killed.
func TestAPIModeSubprocessOnARealNode(t *testing.T) {
	c := testcluster.Need(t, cluster)
	node := testcluster.NeedNode(t, c)
	client := adminClient(t)
	const image = "localhost/configwave:node"
	layout := testpod.Layout(t) // built once per test binary, before the import's own time starts
	require.NoError(t, node.ImportLayoutImage(ctx(t), layout, "reloader", image))

	ns := c.Namespace(t, client)
	applyReloaderRBAC(t, client, ns)
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app-config", map[string]string{"app.yaml": "v1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)

	out := t.TempDir()
	require.NoError(t, os.Chmod(out, 0o777)) // the image's user, 65532, writes the child's record
	file := corev1.HostPathFile
	grace := int64(30)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: corev1.PodSpec{
			ServiceAccountName:            "configwave-reloader",
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:            "app",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"--configmap=app-config", "--configroot=/config", "--", "/child/app"},
				Env: []corev1.EnvVar{
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
					{Name: "SIGNAL_LOG", Value: "/out/signals"},
					{Name: "CONFIG_FILE", Value: "/config/app.yaml"},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/config"}, {Name: "child", MountPath: "/child/app"}, {Name: "out", MountPath: "/out"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "child", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: node.PauseBinary(), Type: &file}}},
				{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: out}}},
			},
		},
	}
	testcluster.OnRealNode(&pod.Spec)
	_, err = client.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	signals := func() string { b, _ := os.ReadFile(filepath.Join(out, "signals")); return string(b) }
	if !assert.Eventually(t, func() bool { return signals() == "start\n" }, time.Minute, tick, "the child never started after the first unpack") {
		t.Fatalf("pod: %s; the child's record: %q", testcluster.DescribePods(ctx(t), adminClient(t), ns), signals())
	}

	patchData(t, client, ns, "app-config", `{"data":{"app.yaml":"v2"}}`)
	require.Eventually(t, func() bool { return strings.Contains(signals(), "hup:v2\n") }, eventually, tick,
		"the child was not told of the change with the new file in place: %q", signals())

	deleted := time.Now()
	require.NoError(t, client.CoreV1().Pods(ns).Delete(ctx(t), "app", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := client.CoreV1().Pods(ns).Get(ctx(t), "app", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Duration(grace-5)*time.Second, tick, "the pod did not end before its grace period ran out")
	t.Logf("pod deletion → pod gone: %s (grace period %d s)", time.Since(deleted).Round(time.Millisecond), grace)
	assert.True(t, strings.HasSuffix(signals(), "term\n"), "kubelet's SIGTERM reached the child: %q", signals())
}
