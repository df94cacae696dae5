package testcluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// nodeTestTimeout bounds what a node test does once its node runs: generous, so that a slow or
// busy machine passes, and it never counts the wait for another test binary's node.
const nodeTestTimeout = 5 * time.Minute

// nodeForTest starts c's real node and returns it with the test's context, whose deadline starts
// once the node is up: the wait for the host's node lock (another test binary's node) is no
// part of the test's time, and the start has bounds of its own (containerd, kubelet Ready).
func nodeForTest(t *testing.T, c *Cluster) (*Node, context.Context) {
	t.Helper()
	n, err := c.Node(t.Context())
	require.NoError(t, err, "start the real node")
	ctx, cancel := context.WithTimeout(t.Context(), nodeTestTimeout)
	t.Cleanup(cancel)
	return n, ctx
}

// A test binary killed while its node runs leaves kubelet's and containerd's changes behind:
// containers and their shims, mounts, cgroups, sysctls, links to its logs. The next node's start
// undoes them, and its own stop leaves the host as it was before either, touching nothing of
// another program's: a /var/log/containers that was there before with a link of its own, and
// what another program makes while the nodes run, in a folder a node made or in one that a
// node once claimed.
func TestNodeStartAfterAKilledRunCleansUp(t *testing.T) {
	needNodeHost(t)
	other := &anotherProgram{}
	t.Cleanup(other.done) // after a failure; at the end of a pass it has run already
	otherLink := other.logLink(t)
	c := ForTest(t)
	n, ctx := nodeForTest(t, c)
	client := kubernetes.NewForConfigOrDie(c.Config())
	ns := Namespace(t, client)
	_, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
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
	others := other.makes(t, n.host)
	require.NotEmpty(t, logLinksInto(n.dir), "kubelet linked the pod's log into /var/log/containers")

	// The run dies: kubelet and containerd are killed; the API relay's socket goes with the
	// process, and so would the lock, which this test hands on to the next start instead, so
	// that no other test binary's node takes the host between.
	for _, p := range n.procs {
		p.kill()
	}
	require.NoError(t, n.relay.stop())
	held := sync.OnceFunc(n.unlock)
	t.Cleanup(held) // a failure before the next start owns it: no other binary waits forever
	c.nodeMu.Lock()
	c.node = nil
	c.nodeMu.Unlock()
	_, err = os.Stat(nodeStatePath)
	require.NoError(t, err, "a killed node leaves its record")
	require.NotEmpty(t, mountsUnder(n.dir), "and its mounts")
	require.NotEmpty(t, shimsOf(n.dir), "and its containers' shims")

	c.nodeMu.Lock()
	n2, err := c.nodeLocked(ctx, NodeOptions{heldLock: held})
	c.nodeMu.Unlock()
	require.NoError(t, err, "a node starts after a killed one")
	assert.Empty(t, mountsUnder(n.dir), "the killed node's mounts are gone")
	assert.Empty(t, shimsOf(n.dir), "its shims are gone")
	assert.NoDirExists(t, n.dir)
	assert.Empty(t, logLinksInto(n.dir), "the killed node's links to its logs are gone")

	// The stop keeps the host's node lock until this test, as the other program, has removed
	// what it made: another test binary's node waiting for the lock would otherwise begin to
	// use the same folders first.
	c.nodeMu.Lock()
	var once sync.Once
	hold := n2.unlock
	release := func() { once.Do(hold) }
	n2.unlock = nil
	c.nodeMu.Unlock()
	t.Cleanup(func() { other.done(); release() }) // after a failure: in this order too
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
	assert.Empty(t, logLinksInto(n2.dir))
	_, err = os.Lstat(otherLink)
	assert.NoError(t, err, "another program's link in /var/log/containers stays")
	for _, p := range others {
		_, err := os.Lstat(p)
		assert.NoError(t, err, "%s, another program's, stays", p)
	}
	for _, p := range append(n.host.Created, n2.host.Created...) {
		if slices.ContainsFunc(others, func(o string) bool { return strings.HasPrefix(o, p+"/") }) {
			continue // a node made it, but it holds another program's file now
		}
		_, err := os.Lstat(p)
		assert.True(t, os.IsNotExist(err), "%s, made by the nodes, is removed", p)
	}
	other.done()
	release()
}

// The real node's pods reach nothing off the host: no route leads there and they have no
// resolver, and the host does not forward for them. kubelet lets in only the API server's
// client certificate, and serves no host logs even to it. While the node runs, the kernel
// settings kubelet changed at its start are the host's again.
func TestNodeKeepsPodsAndKubeletToTheHost(t *testing.T) {
	needNodeHost(t)
	c := ForTest(t)
	n, ctx := nodeForTest(t, c)
	client := kubernetes.NewForConfigOrDie(c.Config())
	ns := Namespace(t, client)
	no := false
	_, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper"},
		Spec: corev1.PodSpec{
			NodeName:                     n.Name,
			AutomountServiceAccountToken: &no,
			Tolerations:                  []corev1.Toleration{{Key: RealNodeTaint, Operator: corev1.TolerationOpExists}},
			Containers:                   []corev1.Container{{Name: "app", Image: PauseImage, ImagePullPolicy: corev1.PullNever}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var containerID string
	require.Eventually(t, func() bool {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "sleeper", metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		containerID = strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		return containerID != ""
	}, time.Minute, 100*time.Millisecond, "the pod never ran")
	pid, err := n.ContainerPID(ctx, containerID)
	require.NoError(t, err)
	netns := fmt.Sprintf("/proc/%d/ns/net", pid)

	t.Run("routes in the pod", func(t *testing.T) {
		out, err := exec.Command("nsenter", "--net="+netns, "ip", "-4", "route", "show").CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.NotContains(t, string(out), "default", "no default route")
		// A route lookup sends nothing: it only says where a packet would go.
		for _, tc := range []struct {
			name, dst, want string
		}{
			{"an address off the host has none", "203.0.113.1", "Network is unreachable"},
			{"the kubernetes Service goes through the host", APIServiceIP, "via " + podGateway},
			{"the host is on the bridge", podGateway, "dev eth0"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out, _ := exec.Command("nsenter", "--net="+netns, "ip", "-4", "route", "get", tc.dst).CombinedOutput()
				assert.Contains(t, string(out), tc.want)
			})
		}
		assert.NoError(t, dialInNetns(netns, net.JoinHostPort(APIServiceIP, "443")), "the pod reaches the API server through the kubernetes Service")
	})

	t.Run("no resolver off the host", func(t *testing.T) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/resolv.conf", pid))
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "nameserver" {
				ip := net.ParseIP(f[1])
				assert.True(t, ip != nil && ip.IsLoopback(), "the pod's nameserver %s is on its own loopback", f[1])
			}
		}
	})

	t.Run("the host's kernel settings", func(t *testing.T) {
		require.Contains(t, n.host.Sysctls, ipForwardSysctl, "net.ipv4.ip_forward is recorded")
		for k, v := range n.host.Sysctls { // kubelet's, and ip_forward with a pod on the bridge
			assert.Equal(t, v, readSysctl(t, k), "sysctl %s is the host's while the node runs", k)
		}
	})

	t.Run("kubelet", func(t *testing.T) {
		cert, err := tls.LoadX509KeyPair(c.pki.KubeletClientCert, c.pki.KubeletClientKey)
		require.NoError(t, err)
		for _, tc := range []struct {
			name string
			path string
			cert bool
			want int
		}{
			{"no certificate: its pods", "/pods", false, http.StatusUnauthorized},
			{"no certificate: the running pods", "/runningpods/", false, http.StatusUnauthorized},
			{"no certificate: a container's log", "/containerLogs/" + ns + "/sleeper/app", false, http.StatusUnauthorized},
			{"no certificate: the host's logs", "/logs/", false, http.StatusUnauthorized},
			{"the API server's certificate: its pods", "/pods", true, http.StatusOK},
			{"the API server's certificate: the host's logs are not served", "/logs/", true, http.StatusMethodNotAllowed}, // kubelet's "logs endpoint is disabled"
		} {
			t.Run(tc.name, func(t *testing.T) {
				// kubelet's serving certificate is its own, self-signed; only the client is checked here.
				tlsConfig := &tls.Config{InsecureSkipVerify: true}
				if tc.cert {
					tlsConfig.Certificates = []tls.Certificate{cert}
				}
				hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
				defer hc.CloseIdleConnections()
				resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d%s", n.kubeletPort, tc.path))
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, tc.want, resp.StatusCode)
			})
		}
		_, err = client.CoreV1().Pods(ns).GetLogs("sleeper", &corev1.PodLogOptions{}).DoRaw(ctx)
		assert.NoError(t, err, "a pod's log through the API server")
	})

	c.stopNode()
	for k, v := range n.host.Sysctls {
		assert.Equal(t, v, readSysctl(t, k), "sysctl %s restored", k)
	}
	for _, p := range n.host.Created {
		_, err := os.Lstat(p)
		assert.True(t, os.IsNotExist(err), "%s, made by the node, is removed", p)
	}
}

// With something still mounted in the node's folder, its removal would delete through the
// mount: the folder stays, and the error says what is mounted and what to do.
func TestRestoreHostLeavesTheFolderWhileSomethingIsMountedInIt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts a tmpfs: needs root")
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "kubelet", "root")
	require.NoError(t, os.MkdirAll(mnt, 0o755))
	require.NoError(t, syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"))
	t.Cleanup(func() { _ = syscall.Unmount(mnt, syscall.MNT_DETACH) })
	kept := filepath.Join(mnt, "volume-file")
	require.NoError(t, os.WriteFile(kept, []byte("a pod's"), 0o644))

	unmount = func(string, int) error { return syscall.EBUSY }
	t.Cleanup(func() { unmount = syscall.Unmount })
	err := restoreHost(&hostState{Dir: dir})
	require.Error(t, err)
	assert.Contains(t, err.Error(), mnt)
	assert.Contains(t, err.Error(), "umount")
	assert.FileExists(t, kept, "nothing was deleted through the mount")
}

// The node's configuration keeps its pods' traffic, their lookups and kubelet's API to the host.
func TestNodeConfigKeepsTheNodeToTheHost(t *testing.T) {
	var cni struct {
		Plugins []map[string]any `json:"plugins"`
	}
	require.NoError(t, json.Unmarshal([]byte(cniConfig("/node", "br0")), &cni))
	var kubelet map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(kubeletConfig("/node", "/cluster/ca.crt", 1, 2, false)), &kubelet))
	for _, tc := range []struct {
		name string
		conf map[string]any
		path string
		want any
	}{
		{"the bridge plugin is not the pods' gateway (it would turn ip_forward on)", cni.Plugins[0], "isGateway", false},
		{"no NAT", cni.Plugins[0], "ipMasq", false},
		{"pods' routes: the Service range only, through the bridge's address", cni.Plugins[0], "ipam.routes",
			[]any{map[string]any{"dst": serviceCIDR, "gw": podGateway}}},
		{"kubelet: no anonymous requests", kubelet, "authentication.anonymous.enabled", false},
		{"kubelet: no bearer tokens", kubelet, "authentication.webhook.enabled", false},
		{"kubelet: client certificates of the cluster's CA", kubelet, "authentication.x509.clientCAFile", "/cluster/ca.crt"},
		{"kubelet: no host logs", kubelet, "enableSystemLogHandler", false},
		{"kubelet: no iptables chains", kubelet, "makeIPTablesUtilChains", false},
		{"kubelet: the node's resolv.conf", kubelet, "resolvConf", "/node/kubelet/resolv.conf"},
		{"kubelet: container logs in the node's folder", kubelet, "podLogsDir", "/node/kubelet/pod-logs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v any = tc.conf
			for _, k := range strings.Split(tc.path, ".") {
				m, ok := v.(map[string]any)
				require.True(t, ok, "%s: %s is not an object", tc.path, k)
				v = m[k]
			}
			assert.Equal(t, tc.want, v)
		})
	}
	for _, line := range strings.Split(resolvConf, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "nameserver" {
			assert.True(t, net.ParseIP(f[1]).IsLoopback(), "nameserver %s", f[1])
		}
	}
}

func needNodeHost(t *testing.T) {
	t.Helper()
	if err := CanRunNode(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

func readSysctl(t *testing.T, k string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/" + k)
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// dialInNetns opens a TCP connection to addr from the network namespace at netns, and closes it.
func dialInNetns(netns, addr string) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, in the pod's namespace, ends with this goroutine.
		runtime.LockOSThread()
		f, err := os.Open(netns)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter %s: %w", netns, err)
			return
		}
		conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err == nil {
			conn.Close()
		}
		errc <- err
	}()
	return <-errc
}

// logLinksInto lists the links in /var/log/containers that point into dir.
func logLinksInto(dir string) []string {
	entries, _ := os.ReadDir("/var/log/containers")
	var out []string
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join("/var/log/containers", e.Name())); err == nil && strings.HasPrefix(target, dir+"/") {
			out = append(out, e.Name())
		}
	}
	return out
}

// anotherProgram stands for a program other than the node that uses the node's host folders.
// done removes what it made, once.
type anotherProgram struct {
	once sync.Once
	undo []func()
}

func (o *anotherProgram) done() {
	o.once.Do(func() {
		for i := len(o.undo) - 1; i >= 0; i-- {
			o.undo[i]()
		}
	})
}

// logLink makes sure /var/log/containers is there before the node starts, with a link of the
// other program's in it.
func (o *anotherProgram) logLink(t *testing.T) string {
	t.Helper()
	const dir = "/var/log/containers"
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		require.NoError(t, os.Mkdir(dir, 0o755))
		o.undo = append(o.undo, func() { _ = syscall.Rmdir(dir) }) // only if empty: a node may use it by now
	}
	link := filepath.Join(dir, fmt.Sprintf("configwave-test-%d.log", os.Getpid()))
	require.NoError(t, os.Symlink("/dev/null", link))
	o.undo = append(o.undo, func() { _ = os.Remove(link) })
	return link
}

// makes makes, while the node runs, what another program could: a file in a folder the node
// uses (and may have made) and, if missing, a folder an earlier version of the node claimed.
// It returns their paths; done removes them, and with them the folder the node made but had to
// leave for the file.
func (o *anotherProgram) makes(t *testing.T, node *hostState) []string {
	t.Helper()
	file := filepath.Join("/run/containerd", fmt.Sprintf("configwave-test-%d", os.Getpid()))
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	nodeMade := node.made("/run/containerd")
	o.undo = append(o.undo, func() {
		_ = os.Remove(file)
		if nodeMade {
			_ = syscall.Rmdir("/run/containerd") // only if empty: a node may use it by now
		}
	})
	made := []string{file}
	if _, err := os.Lstat("/var/log/pods"); errors.Is(err, os.ErrNotExist) {
		require.NoError(t, os.Mkdir("/var/log/pods", 0o755))
		o.undo = append(o.undo, func() { _ = syscall.Rmdir("/var/log/pods") })
		made = append(made, "/var/log/pods")
	}
	return made
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
