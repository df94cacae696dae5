// Command demo is `make demo`: a local control plane, wave and a reloader sidecar against it,
// one ConfigMap change, and everything that follows from it printed as it happens.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testcluster"
)

func main() {
	exit := flag.Bool("exit", false, "stop after the story instead of keeping the control plane up until Ctrl-C")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, !*exit); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
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

func run(ctx context.Context, out io.Writer, wait bool) error {
	p := &printer{out: out, start: time.Now()}
	p.say("configwave demo: a local control plane, wave, a reloader sidecar, and one ConfigMap change")
	p.say("building the control plane if needed (first run only: about 10 minutes on 2 cores, progress below)")
	if _, err := testcluster.EnsureBinaries(ctx, out); err != nil {
		return err
	}
	root, err := testcluster.RepoRoot(ctx)
	if err != nil {
		return err
	}
	p.say("building reloader and wave")
	reloaderBin, rmReloader, err := testcluster.BuildCommand(filepath.Join(root, "cmd", "reloader"), "reloader")
	if err != nil {
		return err
	}
	defer rmReloader()
	waveBin, rmWave, err := testcluster.BuildCommand(filepath.Join(root, "cmd", "wave"), "wave")
	if err != nil {
		return err
	}
	defer rmWave()

	c, err := testcluster.Start(ctx, testcluster.Options{Out: io.Discard})
	if err != nil {
		return err
	}
	defer func() {
		c.Stop()
		_ = c.Remove()
		p.say("stopped: control plane, wave, reloader; nothing left running")
	}()
	p.say("control plane up: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, one kwok node")
	client, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		return err
	}

	// The app of sidecar mode: a reload endpoint that prints what it reads when told.
	configRoot := filepath.Join(c.Dir(), "config")
	if err := os.MkdirAll(configRoot, 0o755); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	reloaded := make(chan string, 16)
	app := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := os.ReadFile(filepath.Join(configRoot, "app.yaml"))
		reloaded <- fmt.Sprintf("%s %s, reads app.yaml = %q", r.Method, r.URL.Path, strings.TrimSpace(string(b)))
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = app.Serve(ln) }()
	defer app.Close()

	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config"},
		Data: map[string]string{"app.yaml": "greeting: hello"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	logs := filepath.Join(c.LogDir())
	stopWave, err := startBinary(waveBin, filepath.Join(logs, "wave.log"), "--kubeconfig="+c.Kubeconfig(), "--namespaces="+ns, "--listen-address=127.0.0.1:0", "--v=2")
	if err != nil {
		return err
	}
	defer stopWave()
	stopReloader, err := startBinary(reloaderBin, filepath.Join(logs, "reloader.log"), "--kubeconfig="+c.Kubeconfig(), "--namespace="+ns,
		"--configmap=app-config", "--configroot="+configRoot, "--reload-http=http://"+ln.Addr().String()+"/-/reload", "--listen-address=127.0.0.1:0", "--v=2")
	if err != nil {
		return err
	}
	defer stopReloader()
	p.say("wave started (watching namespace %q); reloader started as a sidecar for ConfigMap app-config, unpacking into %s", ns, configRoot)

	d := demoDeployment()
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	p.say("applied: ConfigMap app-config {app.yaml: \"greeting: hello\"}, Deployment app (2 replicas, annotated wave.pusher.com/update-on-config-change)")
	if err := waitFor(ctx, func() bool {
		b, _ := os.ReadFile(filepath.Join(configRoot, "app.yaml"))
		return string(b) == "greeting: hello"
	}); err != nil {
		return err
	}
	p.say("reloader: unpacked app.yaml = \"greeting: hello\"")
	if err := testcluster.WaitDeploymentComplete(ctx, client, ns, "app", time.Minute); err != nil {
		return err
	}
	if err := waitFor(ctx, func() bool {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		return err == nil && d.Annotations["configwave.io/config-inputs"] != ""
	}); err != nil {
		return err
	}
	rss, err := replicaSets(ctx, client)
	if err != nil {
		return err
	}
	p.say("Deployment app: %d ReplicaSet (%s), 2/2 pods ready; wave recorded its config inputs and rolled nothing", len(rss), strings.Join(rss, ", "))

	fmt.Fprintln(out, "\n--- patching ConfigMap app-config, as kubectl patch would: greeting: hello -> greeting: hello, world")
	p.since = time.Now()
	var wg sync.WaitGroup
	watch := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && ctx.Err() == nil {
				p.event("error: %v", err)
			}
		}()
	}
	oldRS := rss[0]
	watch(func() error {
		err := waitFor(ctx, func() bool {
			b, _ := os.ReadFile(filepath.Join(configRoot, "app.yaml"))
			return string(b) == "greeting: hello, world"
		})
		if err == nil {
			p.event("reloader: new app.yaml on disk, swapped in atomically (after its 100 ms --debounce)")
		}
		return err
	})
	watch(func() error {
		select {
		case msg := <-reloaded:
			p.event("app: reload request %s", msg)
			return nil
		case <-time.After(time.Minute):
			return errors.New("no reload request within a minute")
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	watch(func() error {
		var hash string
		err := waitFor(ctx, func() bool {
			d, err := client.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
			hash = ""
			if err == nil {
				hash = d.Spec.Template.Annotations["wave.pusher.com/config-hash"]
			}
			return hash != ""
		})
		if err == nil {
			p.event("wave: Deployment app template annotation wave.pusher.com/config-hash = %s…", hash[:16])
		}
		return err
	})
	watch(func() error {
		var newRS string
		err := waitFor(ctx, func() bool {
			names, err := replicaSets(ctx, client)
			for _, n := range names {
				if n != oldRS {
					newRS = n
				}
			}
			return err == nil && newRS != ""
		})
		if err != nil {
			return err
		}
		p.event("kube-controller-manager: new ReplicaSet %s created", newRS)
		if err := testcluster.WaitDeploymentComplete(ctx, client, ns, "app", time.Minute); err != nil {
			return err
		}
		if err := waitFor(ctx, func() bool { return podsOf(ctx, client, oldRS) == 0 }); err != nil {
			return err
		}
		p.event("rollout complete: %s 2/2 ready, old ReplicaSet %s scaled to 0, its pods gone", newRS, oldRS)
		return nil
	})
	if _, err := client.CoreV1().ConfigMaps(ns).Patch(ctx, "app-config", types.MergePatchType,
		[]byte(`{"data":{"app.yaml":"greeting: hello, world"}}`), metav1.PatchOptions{}); err != nil {
		return err
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	evs, _ := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=app,reason=ConfigChanged"})
	for _, e := range evs.Items {
		fmt.Fprintf(out, "\nEvent on Deployment app: %s %s: %s\n", e.Type, e.Reason, e.Message)
	}
	fmt.Fprintln(out)
	p.say("done. Logs until the demo stops: %s (wave.log, reloader.log, each control-plane component)", logs)
	if wait {
		p.say("the control plane stays up: KUBECONFIG=%s; Ctrl-C stops everything", c.Kubeconfig())
		<-ctx.Done()
	}
	return nil
}

func demoDeployment() *appsv1.Deployment {
	d := testcluster.Deployment(ns, "app", 2)
	d.Annotations = map[string]string{"wave.pusher.com/update-on-config-change": "true"}
	d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}}}
	d.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}}
	return d
}

func replicaSets(ctx context.Context, client kubernetes.Interface) ([]string, error) {
	list, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=app"})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, rs := range list.Items {
		names = append(names, rs.Name)
	}
	sort.Strings(names)
	return names, nil
}

func podsOf(ctx context.Context, client kubernetes.Interface, rs string) int {
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=app"})
	if err != nil {
		return -1
	}
	n := 0
	for _, p := range list.Items {
		for _, o := range p.OwnerReferences {
			if o.Name == rs {
				n++
			}
		}
	}
	return n
}

func waitFor(ctx context.Context, cond func() bool) error {
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return nil
}

// startBinary runs one of our binaries with its output in logFile; the returned function stops
// it. Pdeathsig makes sure it dies with the demo even on a crash.
func startBinary(bin, logFile string, args ...string) (func(), error) {
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}, nil
}
