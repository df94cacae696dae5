// Command reloader keeps an application's config files equal to its ConfigMaps and Secrets and
// tells the application to reload: an HTTP request (sidecar mode) or a signal to the app it
// runs as a child (subprocess mode, everything after --).
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	ossignal "os/signal"
	"syscall"
	"time"

	"github.com/oklog/run"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/cli"
	"github.com/configwave/configwave/internal/kubeclient"
	"github.com/configwave/configwave/internal/reload"
	"github.com/configwave/configwave/internal/serve"
	"github.com/configwave/configwave/internal/signal"
	"github.com/configwave/configwave/internal/source"
	"github.com/configwave/configwave/internal/unpack"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() {
	os.Exit(runMain(os.Args[1:]))
}

// exitError carries the app's exit code out of the run group.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("the app exited with code %d", e.code) }

func runMain(args []string) int {
	var o options
	fs := newFlagSet(&o)
	if code, stop := cli.Parse("reloader", fs, args, &o.version, version); stop {
		return code
	}
	var app []string
	if dash := fs.ArgsLenAtDash(); dash >= 0 {
		if dash > 0 {
			fmt.Fprintf(os.Stderr, "reloader: unexpected argument %q before --; the app's command goes after --\n", fs.Args()[0])
			return 2
		}
		app = fs.Args()
	} else if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "reloader: unexpected argument %q; put the app's command after --\n", fs.Arg(0))
		return 2
	}
	cfg, err := o.check(app)
	if err != nil {
		fmt.Fprintf(os.Stderr, "reloader: %v\n", err)
		return 2
	}
	defer klog.Flush()
	if err := run1(cfg); err != nil {
		var exit exitError
		if errors.As(err, &exit) {
			klog.InfoS("the app exited; stopping", "code", exit.code)
			return exit.code
		}
		if errors.Is(err, run.ErrSignal) {
			klog.InfoS("stopping", "reason", err.Error())
			return 0
		}
		klog.ErrorS(err, "reloader stopped")
		return 1
	}
	return 0
}

// run1 wires the parts and runs them until one of them stops.
func run1(cfg *config) error {
	restCfg, err := kubeclient.Config(cfg.kubeconfig, "configwave-reloader/"+cli.Version(version), 0, 0)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("create the API client: %w", err)
	}
	reg := serve.NewRegistry()
	metrics := reload.NewMetrics(reg)
	watcher := source.New(client, cfg.refs, cfg.selector, source.Options{
		OnWatchRestart: func(src string) { metrics.WatchRestarts.WithLabelValues(src).Inc() },
	})
	r := &reload.Reloader{
		Source:        watcher,
		Writer:        unpack.New(cfg.root),
		Layout:        cfg.layout,
		Debounce:      cfg.debounce,
		RetryInterval: cfg.retry,
		Metrics:       metrics,
		Events:        podEvents(client),
	}
	if cfg.http != nil {
		r.Notifier = cfg.http
	}
	if hasSecrets(cfg) {
		r.HashKey = make([]byte, 32)
		if _, err := rand.Read(r.HashKey); err != nil {
			return fmt.Errorf("make a key for the content hash: %w", err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var g run.Group

	var reaper *signal.Reaper
	if len(cfg.app) > 0 || cfg.validate != "" {
		if reaper, err = signal.NewReaper(cfg.subreaper && len(cfg.app) > 0); err != nil {
			return err
		}
		rctx, rcancel := context.WithCancel(ctx)
		g.Add(func() error { reaper.Run(rctx); return nil }, func(error) { rcancel() })
	}
	if cfg.validate != "" {
		check := &reload.Command{Shell: cfg.validate, Timeout: cfg.valTimeout, Reaper: reaper, ShowOutput: !hasSecrets(cfg)}
		r.Check = check.Check
	}

	{ // informers
		wctx, wcancel := context.WithCancel(ctx)
		g.Add(func() error { watcher.Run(wctx); return nil }, func(error) { wcancel() })
	}
	if cfg.once {
		octx, ocancel := context.WithCancel(ctx)
		g.Add(func() error { return r.Once(octx) }, func(error) { ocancel() })
		g.Add(run.SignalHandler(ctx, os.Interrupt, syscall.SIGTERM))
		if err := g.Run(); err != nil {
			return err
		}
		return nil
	}
	if cfg.listen != "" {
		srv, err := serve.Listen(cfg.listen, reg, r.Ready)
		if err != nil {
			return err
		}
		klog.InfoS("serving /healthz, /readyz and /metrics", "address", srv.Addr())
		g.Add(srv.Run, srv.Stop)
	}
	if len(cfg.app) > 0 {
		sup := newSupervisor(reaper, cfg.app, cfg.reloadSig, cfg.startupGrace, cfg.grace)
		r.OnFirstUnpack = func() (signal.Notifier, error) {
			n, err := sup.start()
			if err != nil || cfg.http != nil {
				return cfg.http, err // with --reload-http the app is told over HTTP
			}
			return n, nil
		}
		sctx, scancel := context.WithCancel(ctx)
		g.Add(func() error { return sup.run(sctx) }, func(error) { scancel() })
	} else {
		g.Add(run.SignalHandler(ctx, os.Interrupt, syscall.SIGTERM))
	}
	{ // the loop
		lctx, lcancel := context.WithCancel(ctx)
		g.Add(func() error {
			if err := r.Run(lctx); err != nil {
				return err
			}
			<-lctx.Done() // Run returns early only on error; otherwise wait to be stopped
			return nil
		}, func(error) { lcancel() })
	}
	klog.InfoS("reloader started", "version", cli.Version(version), "sources", len(cfg.refs), "selector", cfg.selector != nil,
		"configroot", cfg.root, "subprocess", len(cfg.app) > 0, "reloadHTTP", cfg.http != nil)
	return g.Run()
}

func hasSecrets(cfg *config) bool {
	for _, r := range cfg.refs {
		if r.Kind == source.Secret {
			return true
		}
	}
	if cfg.selector != nil {
		for _, k := range cfg.selector.Kinds {
			if k == source.Secret {
				return true
			}
		}
	}
	return false
}

// podEvents records Events on the reloader's own pod when it runs in one ($POD_NAME and the
// namespace from the downward API), and nowhere otherwise.
func podEvents(client kubernetes.Interface) reload.EventRecorder {
	name := os.Getenv("POD_NAME")
	if name == "" {
		return nil
	}
	ns := source.DefaultNamespace()
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events(ns)})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "configwave-reloader"})
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: name, UID: types.UID(os.Getenv("POD_UID"))}
	return eventFunc(func(eventtype, reason, message string) { rec.Event(ref, eventtype, reason, message) })
}

type eventFunc func(eventtype, reason, message string)

func (f eventFunc) Event(eventtype, reason, message string) { f(eventtype, reason, message) }

// supervisor runs the app of subprocess mode: it starts it after the first unpack, forwards
// the signals a container runtime sends, and ends the run group with the app's exit code.
type supervisor struct {
	reaper  *signal.Reaper
	args    []string
	sig     syscall.Signal
	startup time.Duration // no reload signal sooner than this after the start
	grace   time.Duration // how long the app may take to exit after a stop signal
	started chan *signal.Child
}

func newSupervisor(r *signal.Reaper, args []string, sig syscall.Signal, startup, grace time.Duration) *supervisor {
	return &supervisor{reaper: r, args: args, sig: sig, startup: startup, grace: grace, started: make(chan *signal.Child, 1)}
}

func (s *supervisor) start() (signal.Notifier, error) {
	c, err := signal.StartChild(s.reaper, s.args, s.sig, s.startup)
	if err != nil {
		return nil, err
	}
	klog.InfoS("app started", "command", s.args[0], "pid", c.Pid())
	s.started <- c
	return c, nil
}

// forwarded are the signals relayed to the app. SIGHUP, USR1 and USR2 too, so that a manual
// `kill -HUP` of the container's PID 1 still reaches the app.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2}

func (s *supervisor) run(ctx context.Context) error {
	sigs := make(chan os.Signal, 8)
	ossignal.Notify(sigs, forwarded...)
	defer ossignal.Stop(sigs)
	var child *signal.Child
	var exited <-chan signal.Exit
	var kill <-chan time.Time // armed by the first stop signal: an app that ignores it is killed
	for {
		select {
		case c := <-s.started:
			child, exited = c, c.Exited()
		case <-kill:
			klog.InfoS("the app did not exit within --shutdown-grace; killing it", "grace", s.grace, "pid", child.Pid())
			_ = child.Signal(syscall.SIGKILL)
			kill = nil
		case sig := <-sigs:
			if child == nil {
				if sig == syscall.SIGHUP || sig == syscall.SIGUSR1 || sig == syscall.SIGUSR2 {
					continue // nothing to reload yet
				}
				klog.InfoS("stopping before the app started", "signal", sig.String())
				return exitError{code: 128 + int(sig.(syscall.Signal))}
			}
			klog.V(2).InfoS("forwarding signal to the app", "signal", sig.String(), "pid", child.Pid())
			if err := child.Signal(sig); err != nil {
				klog.ErrorS(err, "could not forward a signal to the app", "signal", sig.String())
			}
			if kill == nil && (sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == syscall.SIGQUIT) {
				kill = time.After(s.grace)
			}
		case e := <-exited:
			return exitError{code: e.Code()}
		case <-ctx.Done():
			// Another part failed: stop the app as the runtime would, then report that failure.
			if child != nil {
				_ = child.Signal(syscall.SIGTERM)
				select {
				case <-exited:
				case <-time.After(s.grace):
					_ = child.Signal(syscall.SIGKILL)
					<-exited
				}
			}
			return nil
		}
	}
}
