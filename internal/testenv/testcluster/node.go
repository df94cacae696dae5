package testcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Node is a real node beside kwok's: kubelet (built with the control plane), Debian's
// containerd and runc, and Debian's CNI plugins. Its pods really run: kubelet mounts their
// volumes, probes them and signals them. One runs per host at a time (kubelet and containerd
// use fixed host paths); a cluster starts it on demand and stops it first when it stops.
type Node struct {
	Name string
	// Waited is how long its start waited for another test binary's node on this host: a
	// caller moves its own deadline by it (MoveDeadline).
	Waited      time.Duration
	dir         string
	sock        string
	host        *hostState
	opts        NodeOptions
	relay       *apiRelay
	kubeletPort int
	unlock      func() // releases the host-wide node lock
	procs       []*process
}

// RealNodeTaint is the key of the real node's label and NoSchedule taint.
const RealNodeTaint = "configwave.test/real-node"

// ScheduleHereOnly makes the real node the only one the scheduler may use until the test ends:
// its taint is lifted and kwok's node is cordoned, so a workload whose pod spec says nothing of
// nodes (a chart's, as rendered) runs here.
func (n *Node) ScheduleHereOnly(t testing.TB, client kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	patch := func(node, body string) {
		if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatalf("patch node %s: %v", node, err)
		}
	}
	patch(n.Name, `{"spec":{"taints":null}}`)
	patch(NodeName, `{"spec":{"unschedulable":true}}`)
	t.Cleanup(func() {
		patch(NodeName, `{"spec":{"unschedulable":null}}`)
		patch(n.Name, `{"spec":{"taints":[{"key":"`+RealNodeTaint+`","value":"true","effect":"NoSchedule"}]}}`)
	})
}

// PauseImage is the sandbox image the node runs, built at test time from ./pause; a test's
// pods can run it too (imagePullPolicy Never), as an app that sleeps, records signals or exits
// with $EXIT_CODE.
const PauseImage = "localhost/configwave-pause:node"

// NodePrograms are the programs a real node needs, by the Debian package that has them.
var NodePrograms = map[string]string{"containerd": "containerd", "ctr": "containerd", "runc": "runc", "ip": "iproute2"}

// nodeCNIPlugins are Debian's containernetworking-plugins the node's network uses.
var nodeCNIPlugins = []string{"bridge", "host-local", "loopback"}

// CanRunNode says why this machine cannot run a real node, or nil if it can.
func CanRunNode() error {
	if os.Geteuid() != 0 {
		return errors.New("a real node (kubelet, containerd, runc) needs root")
	}
	for prog, pkg := range NodePrograms {
		if _, err := exec.LookPath(prog); err != nil {
			return fmt.Errorf("a real node needs %s: install Debian's %s package (.ci/run does)", prog, pkg)
		}
	}
	for _, p := range nodeCNIPlugins {
		if _, err := os.Stat(filepath.Join("/usr/lib/cni", p)); err != nil {
			return fmt.Errorf("a real node needs the CNI plugin /usr/lib/cni/%s: install Debian's containernetworking-plugins package (.ci/run does)", p)
		}
	}
	return nil
}

// NodeHostChanges says what a real node changes on the host while it runs, for a program to
// tell its user before it starts one. All of it is put back when the node stops, or at the next
// start after a killed run.
func NodeHostChanges() string {
	var dirs []string
	for _, d := range nodeHostDirs {
		dirs = append(dirs, d.path)
	}
	return "the kernel settings kubelet sets at its start (written back once it is ready), mounts and cgroups of its own, " +
		"the folders kubelet, containerd and the CNI plugins use whatever they are told (" + strings.Join(dirs, ", ") + ", made if missing; " +
		"only the node's entries are removed from them), and network interfaces of its own (the pods' bridge, the kubernetes Service's address)"
}

// MoveDeadline returns ctx with its deadline, if it has one, moved later by d: time spent
// waiting for a shared resource (the host's node, held by another test binary) is no part of
// a caller's time. A cancel of ctx (an interrupt) still ends the returned context; cancel
// releases it.
func MoveDeadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok || d <= 0 {
		return context.WithCancel(ctx)
	}
	moved, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline.Add(d))
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	return moved, func() { stop(); cancel() }
}

// NodeOptions change how the real node runs.
type NodeOptions struct {
	// DefaultSyncPeriod runs kubelet at its own default sync period (1 minute) instead of 1 s:
	// mounted ConfigMaps then change as late as on users' nodes.
	DefaultSyncPeriod bool

	// heldLock is the host's node lock, taken already: a test that plays a killed run hands its
	// lock on to the next start, so that no other test binary's node takes the host between.
	heldLock func()
}

// Node starts the cluster's real node, once, and returns it. Later calls return the same node.
func (c *Cluster) Node(ctx context.Context) (*Node, error) {
	c.nodeMu.Lock()
	defer c.nodeMu.Unlock()
	if c.node != nil {
		return c.node, nil
	}
	return c.nodeLocked(ctx, NodeOptions{})
}

// RestartNode stops the real node, if one runs (its pods are deleted first), and starts it
// again with o. Pods for the new node must be created again.
func (c *Cluster) RestartNode(ctx context.Context, o NodeOptions) (*Node, error) {
	c.stopNode()
	c.nodeMu.Lock()
	defer c.nodeMu.Unlock()
	return c.nodeLocked(ctx, o)
}

func (c *Cluster) nodeLocked(ctx context.Context, o NodeOptions) (*Node, error) {
	if err := CanRunNode(); err != nil {
		if o.heldLock != nil {
			o.heldLock()
		}
		return nil, err
	}
	n, err := c.startNode(ctx, o)
	if err != nil {
		return nil, err
	}
	c.node = n
	return n, nil
}

func (c *Cluster) startNode(ctx context.Context, o NodeOptions) (_ *Node, err error) {
	start := time.Now()
	unlock := o.heldLock
	if unlock == nil {
		if unlock, err = lockNodeHost(c.out); err != nil {
			return nil, err
		}
	}
	// The caller's deadline is for the start, not for another test binary's tests on the node;
	// a cancel (an interrupt) still stops it.
	waited := time.Since(start)
	ctx, cancel := MoveDeadline(ctx, waited)
	defer cancel()
	if err := restoreStaleHost(); err != nil {
		unlock()
		return nil, err
	}
	// Short: containerd's socket path must stay under the 108 bytes of a unix socket address.
	dir, err := os.MkdirTemp("/tmp", "cwnode-")
	if err != nil {
		unlock()
		return nil, err
	}
	host, err := recordHost(dir, fmt.Sprintf("cwnode%d", os.Getpid()%100000)) // at most 15 bytes
	if err != nil {
		_ = os.RemoveAll(dir)
		unlock()
		return nil, err
	}
	n := &Node{dir: dir, sock: filepath.Join(dir, "containerd", "containerd.sock"), host: host, opts: o, Waited: waited}
	n.unlock = unlock
	defer func() {
		if err != nil {
			n.shutdown(context.Background(), nil)
		}
	}()
	if err := n.host.makeHostDirs(); err != nil {
		return nil, err
	}
	if err := n.makeBridge(); err != nil {
		return nil, err
	}
	if err := n.writeConfig(c.pki.CAFile); err != nil {
		return nil, err
	}
	if err := n.relayAPI(fmt.Sprintf("127.0.0.1:%d", c.apiPort)); err != nil {
		return nil, err
	}
	if err := n.startContainerd(ctx, c.logDir); err != nil {
		return nil, err
	}
	if err := n.importPause(ctx); err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		return nil, err
	}
	if err := n.startKubelet(ctx, c); err != nil {
		return nil, err
	}
	if err := n.waitReady(ctx, client); err != nil {
		return nil, err
	}
	if err := n.host.putBackKubeletSysctls(); err != nil {
		return nil, err
	}
	fmt.Fprintf(c.out, "Real node %s ready in %s (kubelet, containerd, runc; logs in %s)\n", n.Name, time.Since(start).Round(time.Millisecond), c.logDir)
	return n, nil
}

// writeConfig writes the node's configuration files; kubelet lets in only clients with a
// certificate of clientCA.
func (n *Node) writeConfig(clientCA string) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	n.kubeletPort = ports[0]
	files := map[string]string{
		"containerd/config.toml":           containerdConfig(n.dir, filepath.Join(n.dir, "cni", "net.d")),
		"cni/net.d/10-configwave.conflist": cniConfig(n.dir, n.host.Bridge),
		"kubelet/config.yaml":              kubeletConfig(n.dir, clientCA, ports[0], ports[1], n.opts.DefaultSyncPeriod),
		"kubelet/resolv.conf":              resolvConf,
	}
	for name, content := range files {
		path := filepath.Join(n.dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return fmt.Errorf("write the node's %s: %w", name, err)
		}
	}
	return nil
}

func (n *Node) startContainerd(ctx context.Context, logDir string) error {
	bin, err := exec.LookPath("containerd")
	if err != nil {
		return err
	}
	p, err := startProcessEnv(logDir, "containerd", bin, nil, "--config", filepath.Join(n.dir, "containerd", "config.toml"))
	if err != nil {
		return err
	}
	n.procs = append(n.procs, p)
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("containerd: %w (see %s)", p.exitError(), filepath.Join(logDir, "containerd.log"))
		}
		return n.ctr(ctx, "version") == nil, nil
	})
}

// ctr runs containerd's client against the node's containerd, in the CRI's namespace.
func (n *Node) ctr(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.sock, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (n *Node) startKubelet(ctx context.Context, c *Cluster) error {
	ip, err := nodeIP()
	if err != nil {
		// No default route (a machine cut off from every network): an address of its own on
		// an interface of its own, private to this host, removed at stop.
		if ip, err = n.dummyIP(); err != nil {
			return err
		}
	}
	hostname, err := os.Hostname()
	if err != nil {
		return err
	}
	n.Name = strings.ToLower(hostname)
	// Without /usr/sbin on its PATH kubelet finds no iptables and adds no chains to the host's
	// firewall; mount and umount, which volumes need, are in /usr/bin.
	p, err := startProcessEnv(c.logDir, "kubelet", c.bins.path("kubelet"), []string{"PATH=/usr/bin:/bin"},
		"--config", filepath.Join(n.dir, "kubelet", "config.yaml"),
		"--kubeconfig", c.kubeconfig,
		"--root-dir", filepath.Join(n.dir, "kubelet", "root"),
		"--cert-dir", filepath.Join(n.dir, "kubelet", "pki"),
		// kubelet refuses a loopback node IP; the API server still reaches it on 127.0.0.1
		// through the Hostname address, and no test ever sends traffic to this one.
		"--node-ip", ip,
		"--hostname-override", n.Name,
		"--node-labels", RealNodeTaint+"=true",
		// Pods of other tests (and DaemonSets, which tolerate a cordon) stay off the node
		// unless a test asks for it (ScheduleHereOnly): they could not pull their images.
		"--register-with-taints", RealNodeTaint+"=true:NoSchedule",
		"--v", "2")
	if err != nil {
		return err
	}
	n.procs = append(n.procs, p)
	return nil
}

func (n *Node) waitReady(ctx context.Context, client kubernetes.Interface) error {
	kubelet := n.procs[len(n.procs)-1]
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if kubelet.exited() {
			return false, fmt.Errorf("kubelet: %w (see kubelet.log beside the control plane's logs)", kubelet.exitError())
		}
		node, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

// nodeIP is the IPv4 address of the interface of the default route: kubelet needs an address
// an interface holds and that is not loopback.
func nodeIP() (string, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[1] != "00000000" {
			continue
		}
		iface, err := net.InterfaceByName(fields[0])
		if err != nil {
			continue
		}
		addrs, _ := iface.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", errors.New("a real node needs a non-loopback IPv4 address for kubelet's --node-ip: this machine has no default route")
}

// dummyIP gives the node an address on an empty bridge of its own (the bridge driver is there,
// since the pods' network uses it; the dummy driver may not be).
func (n *Node) dummyIP() (string, error) {
	const ip = "10.244.78.1"
	name := n.host.Bridge + "d"
	n.host.Dummy = name
	if err := n.host.save(); err != nil {
		return "", err
	}
	for _, args := range [][]string{{"link", "add", name, "type", "bridge"}, {"addr", "add", ip + "/32", "dev", name}, {"link", "set", name, "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("no default route, and no interface of its own for kubelet's --node-ip: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return ip, nil
}

// makeBridge makes the pods' bridge, with the gateway address that makes it the host as the
// pods see it, before any pod's network: the bridge plugin only plugs pods into it (see
// cniConfig). Nothing that reaches the host through it is forwarded, whatever the host's
// net.ipv4.ip_forward says, and it carries no IPv6: the pods have IPv4 addresses only.
func (n *Node) makeBridge() error {
	name := n.host.Bridge // recorded with the host's state, before this
	_, subnet, err := net.ParseCIDR(podCIDR)
	if err != nil {
		return err
	}
	ones, _ := subnet.Mask.Size()
	for _, args := range [][]string{{"link", "add", name, "type", "bridge"}, {"addr", "add", fmt.Sprintf("%s/%d", podGateway, ones), "dev", name}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("the pods' bridge: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+name+"/forwarding", []byte("0"), 0o644); err != nil {
		return fmt.Errorf("keep the pods' bridge %s from forwarding: %w", name, err)
	}
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("turn IPv6 off on the pods' bridge %s: %w", name, err)
	}
	if out, err := exec.Command("ip", "link", "set", name, "up").CombinedOutput(); err != nil {
		return fmt.Errorf("the pods' bridge: ip link set %s up: %v: %s", name, err, out)
	}
	return nil
}

// shutdown deletes the node's pods, stops kubelet and containerd, and puts the host back.
func (n *Node) shutdown(ctx context.Context, client kubernetes.Interface) error {
	var errs []error
	if client != nil && n.Name != "" {
		errs = append(errs, n.deletePods(ctx, client))
	}
	for i := len(n.procs) - 1; i >= 0; i-- { // kubelet, then containerd
		n.procs[i].stop(10 * time.Second)
	}
	if n.relay != nil {
		errs = append(errs, n.relay.stop())
	}
	errs = append(errs, putBackHost(n.host))
	if client != nil && n.Name != "" {
		_ = client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
	}
	if n.unlock != nil {
		n.unlock()
	}
	return errors.Join(errs...)
}

// deletePods deletes every pod on the node and waits for kubelet to stop them, so that their
// containers end through kubelet and containerd rather than being killed afterwards. A
// NoExecute taint no pod tolerates comes first: without it a workload still in the cluster
// (the demo's, or one a test left) would have its pods made again on the node as fast as they
// go.
func (n *Node) deletePods(ctx context.Context, client kubernetes.Interface) error {
	stopping := `{"spec":{"unschedulable":true,"taints":[{"key":"` + RealNodeTaint + `","value":"true","effect":"NoSchedule"},` +
		`{"key":"` + RealNodeTaint + `-stopping","value":"true","effect":"NoExecute"}]}}`
	if _, err := client.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, []byte(stopping), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("taint the real node %s before its pods are deleted: %w", n.Name, err)
	}
	sel := metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name}
	pods, err := client.CoreV1().Pods("").List(ctx, sel)
	if err != nil {
		return fmt.Errorf("list the real node's pods: %w", err)
	}
	for _, p := range pods.Items {
		_ = client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods("").List(ctx, sel)
		return err == nil && len(pods.Items) == 0, nil
	})
}

// PodVolumeDir is where kubelet keeps the files of a pod's ConfigMap volume on the host: the
// folder its atomic writer swaps, as the pod's containers see it.
func (n *Node) PodVolumeDir(pod types.UID, volume string) string {
	return filepath.Join(n.dir, "kubelet", "root", "pods", string(pod), "volumes", "kubernetes.io~configmap", volume)
}

// ContainerPID is the host PID of a running container's process (a container ID as a pod's
// status gives it, with or without its containerd:// prefix), as the node's containerd knows
// it: /proc/PID/environ and /proc/PID/root show what the container was started with.
func (n *Node) ContainerPID(ctx context.Context, id string) (int, error) {
	id = strings.TrimPrefix(id, "containerd://")
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.sock, "--namespace", "k8s.io", "tasks", "ls").Output()
	if err != nil {
		return 0, fmt.Errorf("ctr tasks ls: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == id {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("no task %s in the node's containerd:\n%s", id, out)
}

// ContainerEnviron is the environment a container's process was started with. containerd
// reports a task started once runc has let it go, a moment before its init process execs the
// container's command; until then /proc/PID/environ is runc's own (runc:[2:INIT]), so it is read
// once the process is the container's.
func (n *Node) ContainerEnviron(ctx context.Context, id string) ([]string, error) {
	pid, err := n.ContainerPID(ctx, id)
	if err != nil {
		return nil, err
	}
	proc := fmt.Sprintf("/proc/%d/", pid)
	for {
		cmdline, err := os.ReadFile(proc + "cmdline")
		if err != nil {
			return nil, fmt.Errorf("container %s: %w", id, err)
		}
		if !bytes.HasPrefix(cmdline, []byte("runc")) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("container %s: its process %d is still runc's init: %w", id, pid, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	environ, err := os.ReadFile(proc + "environ")
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", id, err)
	}
	return strings.Split(string(environ), "\x00"), nil
}

// PodEmptyDir is where an emptyDir volume of a pod on the node lives on this host.
func (n *Node) PodEmptyDir(pod types.UID, volume string) string {
	return filepath.Join(n.dir, "kubelet", "root", "pods", string(pod), "volumes", "kubernetes.io~empty-dir", volume)
}

// OnRealNode puts a pod spec's pods on the real node: its label selects the node and its taint
// is tolerated; a spec that must stay as rendered (a chart's) uses ScheduleHereOnly instead.
func OnRealNode(spec *corev1.PodSpec) {
	spec.NodeSelector = map[string]string{RealNodeTaint: "true"}
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: RealNodeTaint, Operator: corev1.TolerationOpExists})
}

// PodReady says whether kubelet reports the pod Ready.
func PodReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
