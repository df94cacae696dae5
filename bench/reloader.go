package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
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

// reloaderPropagation: ConfigMap patch → (a) new file visible, (b) reload request at the app,
// (c) SIGHUP at the child; floor: a bare watch on the same ConfigMap.
func reloaderPropagation(e *env, r *report) error {
	ns, err := e.namespace("reloader")
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
	// A second sidecar with the default --debounce: an isolated change must not wait for it.
	defApp, err := newFakeApp()
	if err != nil {
		return err
	}
	defer defApp.srv.Close()
	sideRoot, subRoot := filepath.Join(e.cluster.Dir(), "bench-sidecar"), filepath.Join(e.cluster.Dir(), "bench-subprocess")
	defRoot := filepath.Join(e.cluster.Dir(), "bench-sidecar-default")
	for _, d := range []string{sideRoot, subRoot, defRoot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	common := []string{"--kubeconfig=" + e.cluster.Kubeconfig(), "--namespace=" + ns, "--configmap=app", "--debounce=0"}
	sidecar, err := start(e.reloader, nil, append(common, "--configroot="+sideRoot, "--reload-http="+app.url)...)
	if err != nil {
		return err
	}
	defer sidecar.stop()
	defSidecar, err := start(e.reloader, nil, "--kubeconfig="+e.cluster.Kubeconfig(), "--namespace="+ns, "--configmap=app",
		"--configroot="+defRoot, "--reload-http="+defApp.url)
	if err != nil {
		return err
	}
	defer defSidecar.stop()
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	// The subprocess reloader's app is this binary in child mode (the variable passes through).
	// It says "start" once its handler is in place and we wait for that, so no startup grace.
	sub, err := startEnv(e.reloader, pw, []string{"CONFIGWAVE_BENCH_CHILD=1"}, append(common, "--configroot="+subRoot, "--startup-grace=0", "--", e.self)...)
	pw.Close()
	if err != nil {
		return err
	}
	defer sub.stop()
	hups, started := readStamps(pr, "hup ")
	for _, p := range []*proc{sidecar, sub, defSidecar} {
		if err := p.waitReady(30 * time.Second); err != nil {
			return err
		}
	}
	// Changes are measured from here: the app's handler is in place.
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("the subprocess-mode app did not start")
	}
	w, err := e.client.CoreV1().ConfigMaps(ns).Watch(e.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "app").String()})
	if err != nil {
		return err
	}
	defer w.Stop()

	var floor, file, req, hup, def []time.Duration
	n := e.reps(30, 100)
	for i := 1; i <= n; i++ {
		want := strconv.Itoa(i)
		var fileAt time.Time
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = waitFor(e.ctx, 30*time.Second, func() bool {
				b, _ := os.ReadFile(filepath.Join(sideRoot, "n"))
				return string(b) == want
			})
			fileAt = time.Now()
		}()
		t0 := time.Now()
		if err := e.patchConfigMap(ns, "app", "n", want); err != nil {
			return err
		}
		if err := nextEvent(w, watch.Modified); err != nil {
			return err
		}
		floor = append(floor, time.Since(t0))
		wg.Wait()
		file = append(file, fileAt.Sub(t0))
		for _, c := range []struct {
			ch  <-chan time.Time
			out *[]time.Duration
		}{{app.arrived, &req}, {hups, &hup}, {defApp.arrived, &def}} {
			select {
			case at := <-c.ch:
				*c.out = append(*c.out, at.Sub(t0))
			case <-time.After(30 * time.Second):
				return fmt.Errorf("change %d: no reload within 30s", i)
			}
		}
		// Let the reloaders go idle, for longer than the default --debounce: each change is an
		// isolated one, as a person's edit is.
		time.Sleep(150 * time.Millisecond)
	}
	r.Propagation = &Propagation{Changes: n, Floor: stats(floor), Files: stats(file), HTTP: stats(req), SIGHUP: stats(hup), DefaultHTTP: stats(def)}
	return nil
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
