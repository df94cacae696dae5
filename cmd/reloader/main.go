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
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/process/binarypages"
	"github.com/configwave/configwave/internal/process/serve"
	"github.com/configwave/configwave/internal/process/startup"
	"github.com/configwave/configwave/internal/reloader/notify"
	"github.com/configwave/configwave/internal/reloader/peermetrics"
	"github.com/configwave/configwave/internal/reloader/reload"
	"github.com/configwave/configwave/internal/reloader/source"
	"github.com/configwave/configwave/internal/reloader/supervise"
	"github.com/configwave/configwave/internal/reloader/unpack"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() {
	os.Exit(runMain(os.Args[0], os.Args[1:], os.Getenv))
}

// runMain runs the reloader as started: argv0 is the program name (a peer's, where the image
// gives one), args the arguments.
func runMain(argv0 string, args []string, getenv func(string) string) int {
	cfg, code, stop := parseCommandLine(argv0, args, getenv)
	if stop {
		return code
	}
	if err := handOver(cfg, argv0, args); err != nil {
		fmt.Fprintf(os.Stderr, "reloader: %v\n", err)
		return 2
	}
	applyPromProcessSettings(cfg)
	// One core, unless GOMAXPROCS says otherwise. The reloader does one thing at a time, and with
	// more Ps every change woke threads that looked for work and found none: measured on a
	// kubelet swap, 0.1–0.2 ms of a 1.5 ms reload. They also spend a small CPU limit (the
	// Prometheus Operator gives its sidecar 10m), and Go's own default in a container is never
	// below 2.
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(1)
	}
	ratio := startup.DefaultMemoryLimitRatio
	if cfg.peer.memlimitRatio > 0 { // prometheus-config-reloader's --auto-gomemlimit-ratio
		ratio = cfg.peer.memlimitRatio
	}
	if soft := startup.ApplyMemoryLimit(ratio, os.LookupEnv, os.DirFS("/sys/fs/cgroup")); soft > 0 {
		klog.V(2).InfoS("Go's memory limit set from the container's", "bytes", soft, "ratio", ratio)
	}
	defer klog.Flush()
	if err := run1(cfg); err != nil {
		var exit supervise.ExitError
		if errors.As(err, &exit) {
			klog.InfoS("the app exited; stopping", "code", exit.Code)
			return exit.Code
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

// parseCommandLine reads the command line (or k8s-sidecar's environment) into a checked
// config. When the reloader must stop at once (--help, --version, a bad flag) it returns the
// exit code and true, having said why.
func parseCommandLine(argv0 string, args []string, getenv func(string) string) (*config, int, bool) {
	fail := func(err error) (*config, int, bool) {
		fmt.Fprintf(os.Stderr, "reloader: %v\n", err)
		return nil, 2, true
	}
	sidecar, sidecarPeer, ok, err := k8sSidecarStart(args, getenv)
	if err != nil {
		return fail(err)
	}
	if ok {
		args = sidecar
	}
	cl := newCommandLine()
	if code, stop := startup.Parse("reloader", cl.fs, cl.args(args), &cl.own.version, version); stop {
		return nil, code, true
	}
	app, err := cl.appArgs()
	if err != nil {
		return fail(err)
	}
	o, err := cl.translate(argv0, app)
	if err != nil {
		return fail(err)
	}
	if ok {
		o.peer = sidecarPeer
	}
	cfg, err := o.check(app)
	if err != nil {
		return fail(err)
	}
	return cfg, 0, false
}

// run1 wires the parts and runs them until one of them stops.
func run1(cfg *config) error {
	reg := serve.NewRegistry("reloader", startup.Version(version))
	metrics := reload.NewMetrics(reg)
	r := &reload.Reloader{
		Debounce:       cfg.debounce,
		RetryInterval:  cfg.retry,
		UnhealthyAfter: cfg.unhealthy,
		Metrics:        metrics,
		TellOnStart:    cfg.tellOnStart,
	}
	peers := exportPeerSeries(cfg, reg, r)
	var src runningSource
	var events eventRecorder
	var err error
	if len(cfg.folders) > 0 {
		src, err = readFolders(cfg, r, metrics, peers)
	} else {
		src, events, err = readAPI(cfg, r, metrics, reg)
	}
	if err != nil {
		return err
	}
	r.Source = src
	tellApp(cfg, r)
	if hasSecrets(cfg) {
		r.HashKey = make([]byte, 32)
		if _, err := rand.Read(r.HashKey); err != nil {
			return fmt.Errorf("make a key for the content hash: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g, err := actors(ctx, cfg, r, src, reg, events)
	if err != nil {
		return err
	}
	klog.InfoS("reloader started", "version", startup.Version(version), "sources", len(cfg.refs), "selector", cfg.selector != nil, "folders", cfg.folders,
		"configroot", cfg.root, "subprocess", len(cfg.app) > 0, "reloadHTTP", cfg.http != nil, "reloadProcess", cfg.process != nil, "rollout", cfg.rollout.name())
	for _, n := range cfg.peer.notes {
		klog.InfoS(n)
	}
	return g.Run()
}

// peerSeries are the peers' series exported beside ours, when the command line was a peer's.
type peerSeries struct {
	cmr *peermetrics.ConfigmapReload
	pcr *peermetrics.PrometheusConfigReloader
}

func exportPeerSeries(cfg *config, reg *prometheus.Registry, r *reload.Reloader) peerSeries {
	var p peerSeries
	switch cfg.peer.name {
	case peerConfigmapReload:
		p.cmr = peermetrics.NewConfigmapReload(reg)
		for _, h := range cfg.httpURLs {
			h.OnTry, h.OnDone = p.cmr.Try, p.cmr.Done
		}
	case peerPrometheusConfigReloader:
		method := "http"
		if cfg.process != nil {
			method = "signal"
		}
		p.pcr = peermetrics.NewPrometheusConfigReloader(reg, method)
		r.Observer = p.pcr
	}
	return p
}

// readFolders makes the mounted folders the source: no API client at all, so the pod needs no
// token. The files are read where they are, and rendered when a peer asks.
func readFolders(cfg *config, r *reload.Reloader, metrics *reload.Metrics, peers peerSeries) (runningSource, error) {
	opts := cfg.folderOpts
	opts.OnEvent = func() {
		metrics.FolderEvents.Inc()
		if peers.pcr != nil {
			peers.pcr.WatchEvent()
		}
	}
	opts.OnError = func(error) {
		metrics.FolderWatchErrors.Inc()
		if peers.cmr != nil {
			peers.cmr.WatcherError()
		}
		if peers.pcr != nil {
			peers.pcr.WatchError()
		}
	}
	opts.OnWatches = func(n int) {
		metrics.FolderWatches.Set(float64(n))
		if peers.pcr != nil {
			peers.pcr.Watches(n)
		}
	}
	folders, err := source.NewFolders(cfg.folders, opts)
	if err != nil {
		return nil, fmt.Errorf("--volume-dir: %w", err)
	}
	r.Layout = reload.Mounted{}
	inPlace := reload.InPlace{Dir: cfg.folders[0], Reread: func() (map[string]unpack.File, error) {
		files, _, err := reload.Mounted{}.Files(folders.ReadNow().Objects)
		return files, err
	}}
	r.Writer = &inPlace
	if cfg.peer.renderIn != "" {
		rendered := &reload.Rendered{InPlace: inPlace, Input: cfg.peer.renderIn, Output: cfg.peer.renderOut,
			Content: func(path string, f unpack.File) ([]byte, error) { return source.ReadVerified(path, f.Data) }}
		if peers.pcr != nil {
			rendered.OnRender = peers.pcr.Rendered
		}
		r.Writer = rendered
	}
	return folders, nil
}

// tellApp sets how the app is told: HTTP, or a signal to a named process (confirmed through
// Prometheus' runtime info when a peer asks). A child after -- is told once it runs (actors).
func tellApp(cfg *config, r *reload.Reloader) {
	switch {
	case cfg.http != nil:
		r.Notifier = cfg.http
	case cfg.process != nil:
		r.Notifier = cfg.process
		if cfg.peer.runtimeInfoURL != "" {
			r.Notifier = &notify.RuntimeInfoConfirmed{Notifier: cfg.process, URL: cfg.peer.runtimeInfoURL, TLS: cfg.runtimeInfoTLS}
		}
	}
}

// actors is what runs, each part with what stops it.
func actors(ctx context.Context, cfg *config, r *reload.Reloader, src runningSource, reg *prometheus.Registry, events eventRecorder) (*run.Group, error) {
	g := &run.Group{}

	// The actors that start processes (the loop with --validate-command, the supervisor) wait
	// for their exit statuses from the reaper, so the reaper stops last: only once they have
	// returned. Stopping it with the others would leave a validation command that is being
	// killed at shutdown unreaped, and the loop waiting for it forever.
	var reaper *supervise.Reaper
	var reaperUsers sync.WaitGroup
	// addReaperUser adds an actor that waits for the reaper; it is counted now, before the
	// group runs, so that the reaper's stop never waits on a count still to come.
	addReaperUser := func(execute func(context.Context) error) {
		actx, cancel := context.WithCancel(ctx)
		run := func() error { return execute(actx) }
		if reaper != nil {
			reaperUsers.Add(1)
			run = func() error { defer reaperUsers.Done(); return execute(actx) }
		}
		g.Add(run, func(error) { cancel() })
	}
	if len(cfg.app) > 0 || cfg.validate != "" {
		var err error
		if reaper, err = supervise.NewReaper(cfg.subreaper && len(cfg.app) > 0); err != nil {
			return nil, err
		}
		rctx, rcancel := context.WithCancel(ctx)
		g.Add(func() error { reaper.Run(rctx); return nil }, func(error) { go func() { reaperUsers.Wait(); rcancel() }() })
	}
	if cfg.validate != "" {
		check := &reload.Command{Shell: cfg.validate, Timeout: cfg.valTimeout, Reaper: reaper, ShowOutput: !hasSecrets(cfg)}
		r.Check = check.Check
	}
	addContextActor(g, ctx, func(ctx context.Context) error { src.Run(ctx); return nil }) // informers, or the folder watch
	if events != nil {
		addContextActor(g, ctx, func(ctx context.Context) error { events.Run(ctx); return nil })
	}
	if cfg.once {
		addReaperUser(r.Once)
		g.Add(run.SignalHandler(ctx, os.Interrupt, syscall.SIGTERM))
		return g, nil
	}
	if cfg.listen != "" {
		checks := serve.Checks{Ready: r.Ready, Healthy: r.Healthy, Status: func() any { return statusOf(r, src) }, MetricsPath: cfg.metricsPath}
		if f := cfg.peer.webConfigFile; f != "" {
			checks.Serve = webConfigServe(f)
		}
		srv, err := serve.Listen(cfg.listen, reg, checks)
		switch {
		case err != nil && cfg.peer.healthPortOptional:
			// Grafana's chart runs two sidecars in one pod on one health port; k8s-sidecar runs
			// on without it, and so does the reloader.
			klog.InfoS("warning: the health port is taken (by another sidecar of the pod?): running on without /healthz, /readyz and /metrics, as k8s-sidecar does; give each sidecar its own HEALTH_PORT", "err", err.Error())
		case err != nil:
			return nil, err
		default:
			klog.InfoS("serving /healthz, /readyz, /status and metrics", "address", srv.Addr(), "metricsPath", cfg.metricsPath)
			g.Add(srv.Run, srv.Stop)
		}
	}
	if len(cfg.app) > 0 {
		sup := supervise.New(reaper, cfg.app, cfg.grace)
		r.OnFirstUnpack = func() (notify.Notifier, error) {
			child, err := sup.Start()
			if err != nil || cfg.http != nil {
				return cfg.http, err // with --reload-http the app is told over HTTP
			}
			return &notify.Signal{Process: child, Sig: cfg.reloadSig, NotBefore: child.Started().Add(cfg.startupGrace)}, nil
		}
		addReaperUser(sup.Run)
	} else {
		g.Add(run.SignalHandler(ctx, os.Interrupt, syscall.SIGTERM))
	}
	// The pages of the program that start-up and each burst of work touched, given back.
	addContextActor(g, ctx, func(ctx context.Context) error {
		binarypages.Run(ctx, r.Ready, 2*time.Second, time.Minute)
		<-ctx.Done() // a group ends when any of its actors returns
		return nil
	})
	addReaperUser(func(ctx context.Context) error { // the loop
		if err := r.Run(ctx); err != nil {
			return err
		}
		<-ctx.Done() // Run returns early only on error; otherwise wait to be stopped
		return nil
	})
	return g, nil
}

// eventRecorder records Events on the reloader's own pod (podevents, in the API build) until
// its context ends.
type eventRecorder interface {
	Run(context.Context)
}

// statusOf is /status: the reload loop's, and the part of --rollout=one-first's gate.
func statusOf(r *reload.Reloader, src runningSource) any {
	st := r.CurrentStatus()
	if g, ok := src.(interface{ RolloutStatus() any }); ok {
		return struct {
			reload.Status
			Rollout any `json:"rollout"`
		}{st, g.RolloutStatus()}
	}
	return st
}

// runningSource is a source that runs until its context ends.
type runningSource interface {
	reload.Source
	Run(context.Context)
}

// addContextActor runs execute on a context of its own, ended when the group stops.
func addContextActor(g *run.Group, parent context.Context, execute func(context.Context) error) {
	ctx, cancel := context.WithCancel(parent)
	g.Add(func() error { return execute(ctx) }, func(error) { cancel() })
}

// hasSecrets reports whether a Secret's value may be among the files: then the content hash
// shown in logs, Events and a metric is keyed. A mounted folder may hold anything.
func hasSecrets(cfg *config) bool {
	if len(cfg.folders) > 0 {
		return true
	}
	for _, r := range cfg.refs {
		if r.Kind == configref.Secret {
			return true
		}
	}
	if cfg.selector != nil {
		for _, k := range cfg.selector.Kinds {
			if k == configref.Secret {
				return true
			}
		}
	}
	return false
}
