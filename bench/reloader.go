package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// childApp is the app of subprocess mode: it prints the wall-clock time of every SIGHUP.
func childApp() {
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM)
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(w, "start")
	w.Flush()
	for s := range sigs {
		if s == syscall.SIGTERM {
			return
		}
		fmt.Fprintf(w, "hup %d\n", time.Now().UnixNano())
		w.Flush()
	}
}

// bareAPIWatcher is the API floor's process (this binary, CONFIGWAVE_BENCH_API_WATCHER=
// KUBECONFIG NAMESPACE NAME): a client-go watch of one ConfigMap, the least a sidecar must do to
// see a change, in a process of its own that sleeps until the event comes, as a sidecar does.
// It prints the time of each change.
func bareAPIWatcher(spec string) {
	f := strings.Fields(spec)
	cfg, err := clientcmd.BuildConfigFromFlags("", f[0])
	var w watch.Interface
	if err == nil {
		var c kubernetes.Interface
		if c, err = kubernetes.NewForConfig(cfg); err == nil {
			w, err = c.CoreV1().ConfigMaps(f[1]).Watch(context.Background(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", f[2]).String()})
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bare API watcher:", err)
		os.Exit(1)
	}
	fmt.Println("start")
	for ev := range w.ResultChan() {
		if ev.Type == watch.Modified {
			fmt.Printf("event %d\n", time.Now().UnixNano())
		}
	}
}

// startChild runs this binary in the child mode env names (NAME=spec) and returns, once the
// child said "start", the times it prints after "event "; stop kills it.
func startChild(e *env, env, what string) (stamps <-chan time.Time, stop func(), err error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(e.self)
	cmd.Env = append(os.Environ(), env)
	cmd.Stdout, cmd.Stderr = pw, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, nil, err
	}
	stop = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	stamps, started := readStamps(pr, "event ")
	select {
	case <-started:
		return stamps, stop, nil
	case <-time.After(30 * time.Second):
		stop()
		return nil, nil, fmt.Errorf("%s did not start", what)
	}
}

// readStamps reads what a child of this binary prints (childApp, bareWatcher): started closes
// at its "start" line, and each "PREFIX<unix nanoseconds>" line is sent on stamps.
func readStamps(r io.Reader, prefix string) (stamps <-chan time.Time, started <-chan struct{}) {
	out, begun := make(chan time.Time, 1024), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if sc.Text() == "start" {
				close(begun)
			}
			if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				out <- time.Unix(0, n)
			}
		}
	}()
	return out, begun
}

// fakeApp is a reload endpoint that reports when each request arrived.
type fakeApp struct {
	url     string
	srv     *http.Server
	arrived chan time.Time
}

func newFakeApp() (*fakeApp, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &fakeApp{url: "http://" + ln.Addr().String() + "/-/reload", arrived: make(chan time.Time, 1024)}
	a.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { a.arrived <- time.Now() }), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

func (e *env) createConfigMap(ns, name string, data map[string]string) error {
	_, err := e.client.CoreV1().ConfigMaps(ns).Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{})
	return err
}

func (e *env) patchConfigMap(ns, name, key, value string) error {
	_, err := e.client.CoreV1().ConfigMaps(ns).Patch(e.ctx, name, types.MergePatchType, fmt.Appendf(nil, `{"data":{%q:%q}}`, key, value), metav1.PatchOptions{})
	return err
}

func (e *env) reps(quick, full int) int {
	if e.full {
		return full
	}
	return quick
}

// propagationRound is how many changes of each row make one round: the ratio of one run's
// medians moved by 0.1× from run to run, and rounds show that spread within a run.
const propagationRound = 10

// reloaderPropagation: ConfigMap patch → (a) new file visible, (b) reload request at the app,
// (c) SIGHUP at the child, (d) the reload request of a sidecar with the default --debounce;
// floor: a bare watch event in a process of its own (bareAPIWatcher). Each has a ConfigMap of its own, changed in turn, one at a time:
// each change waits for what it measures before the next is sent. On 2 cores, reloaders and a
// floor woken by one change competed for a core, each losing time that was not its own.
func reloaderPropagation(e *env, r *report) error {
	g, err := startPropagationRig(e)
	defer g.stop()
	if err != nil {
		return err
	}
	// arrivalInto: a change measured by when ch next says its result arrived, noted in into.
	arrivalInto := func(into *[]time.Duration, ch <-chan time.Time) func(time.Time) error {
		return func(t0 time.Time) error {
			at, err := arrived(ch)
			*into = append(*into, at.Sub(t0))
			return err
		}
	}
	var floor, file, req, hup, def []time.Duration
	n := e.reps(30, 100)
	for i := 1; i <= n; i++ {
		want := strconv.Itoa(i)
		change := func(name string, measure func(t0 time.Time) error) error {
			t0 := time.Now()
			if err := e.patchConfigMap(g.ns, name, "n", want); err != nil {
				return err
			}
			if err := measure(t0); err != nil {
				return fmt.Errorf("change %d of ConfigMap %s: %w", i, name, err)
			}
			// The next change comes to a quiet machine; each sidecar's changes are more than
			// the default --debounce apart, so each is an isolated one, as a person's edit is.
			time.Sleep(60 * time.Millisecond)
			return nil
		}
		if err := change("floor", arrivalInto(&floor, g.watched)); err != nil {
			return err
		}
		if err := change("app", func(t0 time.Time) error {
			at, err := g.visible()
			if err != nil {
				return err
			}
			if b, _ := os.ReadFile(filepath.Join(g.sideRoot, "n")); string(b) != want {
				return fmt.Errorf("the sidecar swapped in %q, want %q", b, want)
			}
			file = append(file, at.Sub(t0))
			if at, err = arrived(g.app.arrived); err == nil {
				req = append(req, at.Sub(t0))
			}
			return err
		}); err != nil {
			return err
		}
		if err := change("sub", arrivalInto(&hup, g.hups)); err != nil {
			return err
		}
		if err := change("def", arrivalInto(&def, g.defApp.arrived)); err != nil {
			return err
		}
	}
	r.Propagation = &Propagation{Changes: n, Floor: stats(floor), Files: stats(file), HTTP: stats(req), SIGHUP: stats(hup), DefaultHTTP: stats(def),
		Rounds: map[string]Spread{
			"files_visible":                   roundSpread(file, floor, propagationRound),
			"reload_request":                  roundSpread(req, floor, propagationRound),
			"sighup":                          roundSpread(hup, floor, propagationRound),
			"reload_request_default_debounce": roundSpread(def, floor, propagationRound),
		}}
	return nil
}

// propagationRig is what reloaderPropagation measures, running: a sidecar telling app over
// HTTP (its root watched for ..data swaps), one with the default --debounce telling defApp, a
// subprocess-mode reloader whose child stamps each SIGHUP into hups, and the bare API watcher
// (the floor) stamping each event into watched. Each has its ConfigMap in ns.
type propagationRig struct {
	ns                  string
	sideRoot            string
	app, defApp         *fakeApp
	sidecar, defSidecar *proc
	sub                 *proc
	hups, watched       <-chan time.Time
	swaps               *fsnotify.Watcher
	cleanups            []func()
}

// stop stops whatever startPropagationRig started, last first.
func (g *propagationRig) stop() {
	for i := len(g.cleanups) - 1; i >= 0; i-- {
		g.cleanups[i]()
	}
}

func startPropagationRig(e *env) (*propagationRig, error) {
	g := &propagationRig{}
	ns, err := e.namespace("reloader")
	if err != nil {
		return g, err
	}
	g.ns = ns
	for _, name := range []string{"floor", "app", "sub", "def"} {
		if err := e.createConfigMap(ns, name, map[string]string{"n": "0"}); err != nil {
			return g, err
		}
	}
	if g.app, err = newFakeApp(); err != nil {
		return g, err
	}
	g.cleanups = append(g.cleanups, func() { g.app.srv.Close() })
	// A second sidecar with the default --debounce: an isolated change must not wait for it.
	if g.defApp, err = newFakeApp(); err != nil {
		return g, err
	}
	g.cleanups = append(g.cleanups, func() { g.defApp.srv.Close() })
	g.sideRoot = filepath.Join(e.cluster.Dir(), "bench-sidecar")
	subRoot, defRoot := filepath.Join(e.cluster.Dir(), "bench-subprocess"), filepath.Join(e.cluster.Dir(), "bench-sidecar-default")
	for _, d := range []string{g.sideRoot, subRoot, defRoot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return g, err
		}
	}
	common := []string{"--kubeconfig=" + e.cluster.Kubeconfig(), "--namespace=" + ns}
	if g.sidecar, err = start(e.reloader, nil, append(common, "--configmap=app", "--debounce=0", "--configroot="+g.sideRoot, "--reload-http="+g.app.url)...); err != nil {
		return g, err
	}
	g.cleanups = append(g.cleanups, g.sidecar.stop)
	if g.defSidecar, err = start(e.reloader, nil, append(common, "--configmap=def", "--configroot="+defRoot, "--reload-http="+g.defApp.url)...); err != nil {
		return g, err
	}
	g.cleanups = append(g.cleanups, g.defSidecar.stop)
	if err := g.startSubprocess(e, common, subRoot); err != nil {
		return g, err
	}
	watched, stopWatcher, err := startChild(e, "CONFIGWAVE_BENCH_API_WATCHER="+e.cluster.Kubeconfig()+" "+ns+" floor", "the bare API watcher")
	if err != nil {
		return g, err
	}
	g.watched = watched
	g.cleanups = append(g.cleanups, stopWatcher)
	// New files are visible once the sidecar renames ..data: seen with inotify, not by polling
	// the file, which would take a core from what is measured.
	if g.swaps, err = fsnotify.NewWatcher(); err != nil {
		return g, err
	}
	g.cleanups = append(g.cleanups, func() { g.swaps.Close() })
	return g, g.swaps.Add(g.sideRoot)
}

// startSubprocess starts the subprocess-mode reloader, whose app is this binary in child mode
// (the variable passes through), and waits until every reloader is ready and the child's
// handler is in place (it says "start"), so that no startup grace is needed.
func (g *propagationRig) startSubprocess(e *env, common []string, subRoot string) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	g.sub, err = startEnv(e.reloader, pw, []string{"CONFIGWAVE_BENCH_CHILD=1"}, append(common, "--configmap=sub", "--debounce=0", "--configroot="+subRoot, "--startup-grace=0", "--", e.self)...)
	pw.Close()
	if err != nil {
		return err
	}
	g.cleanups = append(g.cleanups, g.sub.stop)
	hups, started := readStamps(pr, "hup ")
	g.hups = hups
	for _, p := range []*proc{g.sidecar, g.sub, g.defSidecar} {
		if err := p.waitReady(30 * time.Second); err != nil {
			return err
		}
	}
	select {
	case <-started:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("the subprocess-mode app did not start")
	}
}

// visible waits for the sidecar's next ..data swap and says when it came.
func (g *propagationRig) visible() (time.Time, error) {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-g.swaps.Events:
			if ev.Has(fsnotify.Create) && filepath.Base(ev.Name) == "..data" {
				return time.Now(), nil
			}
		case <-timeout:
			return time.Time{}, errors.New("no ..data swap under the sidecar's root within 30s")
		}
	}
}

// arrived waits for ch's next stamp.
func arrived(ch <-chan time.Time) (time.Time, error) {
	select {
	case at := <-ch:
		return at, nil
	case <-time.After(30 * time.Second):
		return time.Time{}, errors.New("no reload within 30s")
	}
}

func nextEvent(w watch.Interface, typ watch.EventType) error {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch closed")
			}
			if ev.Type == typ {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("no %s event within 30s", typ)
		}
	}
}

// reloaderBurst: 200 updates in 2 s with the default debounce.
func reloaderBurst(e *env, r *report) error {
	ns, err := e.namespace("burst")
	if err != nil {
		return err
	}
	if err := e.createConfigMap(ns, "app", map[string]string{"n": "0"}); err != nil {
		return err
	}
	app, err := newFakeApp()
	if err != nil {
		return err
	}
	defer app.srv.Close()
	root := filepath.Join(e.cluster.Dir(), "bench-burst")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	p, err := start(e.reloader, nil, "--kubeconfig="+e.cluster.Kubeconfig(), "--namespace="+ns, "--configmap=app", "--configroot="+root, "--reload-http="+app.url)
	if err != nil {
		return err
	}
	defer p.stop()
	if err := p.waitReady(30 * time.Second); err != nil {
		return err
	}
	const updates = 200
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	began := time.Now()
	for i := 1; i <= updates; i++ {
		<-tick.C
		if err := e.patchConfigMap(ns, "app", "n", strconv.Itoa(i)); err != nil {
			return err
		}
	}
	lastAck := time.Now()
	if err := waitFor(e.ctx, 30*time.Second, func() bool { b, _ := os.ReadFile(filepath.Join(root, "n")); return string(b) == strconv.Itoa(updates) }); err != nil {
		return err
	}
	final := time.Since(lastAck)
	time.Sleep(2 * time.Second) // any reload still due
	r.Burst = &Burst{Updates: updates, Spread: ms(lastAck.Sub(began)), Reloads: len(app.arrived), FinalOnDisk: ms(final)}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// sidecarFootprint: an idle reloader watching one ConfigMap.
func sidecarFootprint(e *env, r *report) error {
	ns, err := e.namespace("idle")
	if err != nil {
		return err
	}
	if err := e.createConfigMap(ns, "app", map[string]string{"n": "0"}); err != nil {
		return err
	}
	root := filepath.Join(e.cluster.Dir(), "bench-idle")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	p, err := start(e.reloader, nil, "--kubeconfig="+e.cluster.Kubeconfig(), "--namespace="+ns, "--configmap=app", "--configroot="+root, "--reload-http=http://127.0.0.1:1/")
	if err != nil {
		return err
	}
	defer p.stop()
	if err := p.waitReady(30 * time.Second); err != nil {
		return err
	}
	window := time.Duration(e.reps(10, 60)) * time.Second
	before, t := cpuTicks(p.cmd.Process.Pid), time.Now()
	time.Sleep(window)
	ticks := cpuTicks(p.cmd.Process.Pid) - before
	sizes := map[string]float64{"reloader": fileMiB(e.reloader), "wave": fileMiB(e.wave)}
	r.Footprint = &Footprint{Window: window.Seconds(), RSSMiB: mib(rssKiB(p.cmd.Process.Pid)),
		CPUPercent: float64(ticks) / 100 / time.Since(t).Seconds() * 100, BinaryMiB: sizes}
	return nil
}
