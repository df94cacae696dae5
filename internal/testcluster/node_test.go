package testcluster

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// A test binary killed while its node runs leaves kubelet's and containerd's changes behind:
// containers and their shims, mounts, cgroups, sysctls. The next node's start undoes them, and
// its own stop leaves the host as it was before either.
func TestNodeStartAfterAKilledRunCleansUp(t *testing.T) {
	if err := CanRunNode(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	c := ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := kubernetes.NewForConfigOrDie(c.Config())
	n, err := c.Node(ctx)
	require.NoError(t, err)
	ns := Namespace(t, client)
	_, err = client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper"},
		Spec: corev1.PodSpec{
			NodeName:    n.Name,
			Tolerations: []corev1.Toleration{{Key: RealNodeTaint, Operator: corev1.TolerationOpExists}},
			Containers:  []corev1.Container{{Name: "app", Image: PauseImage, ImagePullPolicy: corev1.PullNever}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "sleeper", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning
	}, time.Minute, 100*time.Millisecond, "the pod never ran")

	// The run dies: kubelet and containerd are killed; the lock and the API relay's socket go
	// with the process.
	for _, p := range n.procs {
		p.kill()
	}
	require.NoError(t, n.relay.stop())
	n.unlock()
	c.nodeMu.Lock()
	c.node = nil
	c.nodeMu.Unlock()
	_, err = os.Stat(nodeStatePath)
	require.NoError(t, err, "a killed node leaves its record")
	require.NotEmpty(t, mountsUnder(n.dir), "and its mounts")
	require.NotEmpty(t, shimsOf(n.dir), "and its containers' shims")

	n2, err := c.Node(ctx)
	require.NoError(t, err, "a node starts after a killed one")
	assert.Empty(t, mountsUnder(n.dir), "the killed node's mounts are gone")
	assert.Empty(t, shimsOf(n.dir), "its shims are gone")
	assert.NoDirExists(t, n.dir)

	c.stopNode()
	for _, link := range []string{n2.host.Bridge, n2.host.Service} {
		_, err := net.InterfaceByName(link)
		assert.Error(t, err, "interface %s is removed", link)
	}
	assert.Empty(t, mountsUnder(n2.dir))
	assert.NoDirExists(t, n2.dir)
	assert.NoFileExists(t, nodeStatePath)
	// As the first node found the host once it held the lock (another test binary's node may
	// have run until then): its sysctls, and none of the folders it found missing.
	for k, v := range n.host.Sysctls {
		b, err := os.ReadFile("/proc/sys/" + k)
		require.NoError(t, err)
		assert.Equal(t, v, strings.TrimSpace(string(b)), "sysctl %s restored", k)
	}
	for _, p := range n.host.Created {
		_, err := os.Lstat(p)
		assert.True(t, os.IsNotExist(err), "%s, made by the nodes, is removed", p)
	}
}

func mountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

func shimsOf(dir string) []string {
	var out []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		b, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), "containerd-shim") && strings.Contains(string(b), dir+"/") {
			out = append(out, p.Name())
		}
	}
	return out
}
