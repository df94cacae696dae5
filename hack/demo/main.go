// Command demo is `make demo`: a local control plane, wave and a reloader sidecar against it,
// one ConfigMap change, and everything that follows from it printed as it happens. As root
// with Debian's containerd, runc and CNI plugins the pods really run on a real node (nginx with
// our sidecar from our image), which changes the host until it stops (the demo says how before
// it starts it; -kwok keeps the host as it is); elsewhere kwok's pods stand in and the sidecar
// runs here.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

func main() {
	exit := flag.Bool("exit", false, "stop after the story instead of keeping the control plane up until Ctrl-C")
	kwok := flag.Bool("kwok", false, "kwok's pods and the sidecar on this machine, even where a real node could run: the host is left as it is")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, options{wait: !*exit, kwok: *kwok}); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type options struct {
	wait bool // keep the control plane up until Ctrl-C
	kwok bool // never start a real node
}

// printer prefixes every line with the time since the start, or since the change.
type printer struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
	since time.Time
}

func (p *printer) say(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, "[%6.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

func (p *printer) event(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, "  +%5dms  %s\n", time.Since(p.since).Milliseconds(), fmt.Sprintf(format, args...))
}

const ns = "demo"

// demo is what every step shares: the cluster, its client, our binaries and the printer.
type demo struct {
	*printer
	c           *testcluster.Cluster
	client      kubernetes.Interface
	reloaderBin string
	waveBin     string
	pluginBin   string   // kubectl-configwave
	undo        []func() // what stop undoes, last first
}

// later has stop undo f: whatever a step starts ends with the demo, however it ends.
func (d *demo) later(f func()) { d.undo = append(d.undo, f) }

func (d *demo) stop() {
	for i := len(d.undo) - 1; i >= 0; i-- {
		d.undo[i]()
	}
}

// A story is where the app runs and what tells it of the change: kwok's pods with the sidecar
// on this machine, or real pods on a real node.
type story interface {
	// setUp creates ConfigMap app-config and the app that reloads it, and waits until the app
	// runs the first config.
	setUp(ctx context.Context, d *demo) error
	// app is the Deployment that cannot reload, which wave rolls.
	app() *appsv1.Deployment
	// patch is the merge patch of ConfigMap app-config.
	patch() string
	// follow starts the watchers of what the story's own parts do after the change.
	follow(ctx context.Context, d *demo, w *watchers)
}

func run(ctx context.Context, out io.Writer, o options) error {
	d := &demo{printer: &printer{out: out, start: time.Now()}}
	d.say("configwave demo: a local control plane, wave, a reloader sidecar, and one ConfigMap change")
	defer d.stop()
	if err := d.start(ctx); err != nil {
		return err
	}
	s, waited := d.pickStory(ctx, o.kwok)
	// The wait for another program's real node on this host is no part of the demo's time.
	ctx, cancel := testcluster.MoveDeadline(ctx, waited)
	defer cancel()
	if _, err := d.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	stopWave, err := startBinary(d.waveBin, filepath.Join(d.c.LogDir(), "wave.log"), "--kubeconfig="+d.c.Kubeconfig(), "--namespaces="+ns, "--listen-address=127.0.0.1:0", "--v=2")
	if err != nil {
		return err
	}
	d.later(stopWave)
	d.say("wave started, watching namespace %q", ns)
	if err := s.setUp(ctx, d); err != nil {
		return err
	}
	oldRS, err := d.applyApp(ctx, s.app())
	if err != nil {
		return err
	}
	if err := d.change(ctx, s, oldRS); err != nil {
		return err
	}
	if err := d.history(ctx); err != nil {
		return err
	}
	d.say("done. Logs until the demo stops: %s (wave.log, reloader.log or the node's, each control-plane component)", d.c.LogDir())
	if o.wait {
		d.say("the control plane stays up: KUBECONFIG=%s; Ctrl-C stops everything", d.c.Kubeconfig())
		<-ctx.Done()
	}
	return nil
}

// start builds what the demo runs and starts the control plane.
func (d *demo) start(ctx context.Context) error {
	d.say("building the control plane if needed (first run only: about 15 minutes on 2 cores, progress below)")
	if _, err := testcluster.EnsureBinaries(ctx, d.out); err != nil {
		return err
	}
	root, err := testcluster.RepoRoot(ctx)
	if err != nil {
		return err
	}
	d.say("building reloader, wave and the kubectl plugin")
	for _, b := range []struct {
		name string
		path *string
	}{{"reloader", &d.reloaderBin}, {"wave", &d.waveBin}, {"kubectl-configwave", &d.pluginBin}} {
		bin, rm, err := testcluster.BuildCommand(filepath.Join(root, "cmd", b.name), b.name)
		if err != nil {
			return err
		}
		d.later(rm)
		*b.path = bin
	}
	if d.c, err = testcluster.Start(ctx, testcluster.Options{Out: io.Discard}); err != nil {
		return err
	}
	d.later(func() {
		d.c.Stop()
		_ = d.c.Remove()
		d.say("stopped: every pod, the control plane, wave and the reloader; nothing left running")
	})
	d.say("control plane up: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, one kwok node")
	d.client, err = kubernetes.NewForConfig(d.c.Config())
	return err
}

// pickStory starts a real node where the machine can run one, and says why not where it
// cannot.
func (d *demo) pickStory(ctx context.Context, kwokOnly bool) (story, time.Duration) {
	if kwokOnly {
		return &kwokStory{}, 0
	}
	if err := testcluster.CanRunNode(); err != nil {
		d.say("no real node here (%v): kwok's pods stand in, and the sidecar runs on this machine", err)
		return &kwokStory{}, 0
	}
	if _, err := testcluster.LookProgram("nginx", "nginx-light"); err != nil {
		d.say("no nginx for the real node's app (%v): kwok's pods stand in, and the sidecar runs on this machine", err)
		return &kwokStory{}, 0
	}
	// Say it before the host changes: the demo runs as root, and -kwok leaves the host alone.
	d.say("starting a real node on this machine (root, with containerd, runc and the CNI plugins): while it runs it changes %s; all of it is put back when the demo stops, or at the next start after a killed run. go run ./hack/demo -kwok runs the demo without touching the host",
		testcluster.NodeHostChanges())
	started := time.Now()
	node, err := d.c.Node(ctx)
	if err != nil {
		d.say("the real node did not start (%v): kwok's pods stand in, and the sidecar runs on this machine", err)
		return &kwokStory{}, 0
	}
	d.say("real node %s ready in %.1fs: kubelet, containerd and runc; the pods below really run", node.Name, time.Since(started).Seconds())
	return &realStory{node: node}, node.Waited
}

// applyApp creates the Deployment wave rolls and waits until it runs and wave has recorded
// what its pods see; it returns the ReplicaSet of the first config.
func (d *demo) applyApp(ctx context.Context, app *appsv1.Deployment) (string, error) {
	if _, err := d.client.AppsV1().Deployments(ns).Create(ctx, app, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	d.say("applied: Deployment app (2 replicas, reads ConfigMap app-config only at start; annotated wave.pusher.com/update-on-config-change)")
	if err := testcluster.WaitDeploymentComplete(ctx, d.client, ns, "app", 2*time.Minute); err != nil {
		return "", fmt.Errorf("deployment app: %w\n%s", err, testcluster.DescribePods(ctx, d.client, ns))
	}
	if err := waitFor(ctx, func() bool {
		dep, err := d.client.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		return err == nil && dep.Annotations["configwave.io/config-inputs"] != ""
	}); err != nil {
		return "", err
	}
	rss, err := replicaSets(ctx, d.client)
	if err != nil {
		return "", err
	}
	d.say("Deployment app: %d ReplicaSet (%s), 2/2 pods ready; wave recorded its config inputs and rolled nothing", len(rss), strings.Join(rss, ", "))
	return rss[0], nil
}

// history prints what `kubectl configwave history` says of the app, as a user would type it.
func (d *demo) history(ctx context.Context) error {
	fmt.Fprintln(d.out, "--- kubectl configwave history deploy/app -n "+ns)
	cmd := exec.CommandContext(ctx, d.pluginBin, "history", "deploy/app", "-n", ns, "--kubeconfig="+d.c.Kubeconfig())
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	_, _ = d.out.Write(out)
	fmt.Fprintln(d.out)
	if err != nil {
		return fmt.Errorf("kubectl configwave history: %w", err)
	}
	return nil
}

// change patches the ConfigMap and prints what follows, each part as it happens.
func (d *demo) change(ctx context.Context, s story, oldRS string) error {
	fmt.Fprintln(d.out, "\n--- patching ConfigMap app-config, as kubectl patch would: greeting: hello -> greeting: hello, world")
	d.since = time.Now()
	w := &watchers{ctx: ctx, p: d.printer}
	s.follow(ctx, d, w)
	d.followRollout(ctx, w, oldRS)
	if _, err := d.client.CoreV1().ConfigMaps(ns).Patch(ctx, "app-config", types.MergePatchType, []byte(s.patch()), metav1.PatchOptions{}); err != nil {
		return err
	}
	w.wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	evs, _ := d.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=app,reason=ConfigChanged"})
	for _, e := range evs.Items {
		fmt.Fprintf(d.out, "\nEvent on Deployment app: %s %s: %s\n", e.Type, e.Reason, e.Message)
	}
	fmt.Fprintln(d.out)
	return nil
}
