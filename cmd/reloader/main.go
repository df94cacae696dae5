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
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/oklog/run"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/cli"
	"github.com/configwave/configwave/internal/compat"
	"github.com/configwave/configwave/internal/configref"
	"github.com/configwave/configwave/internal/coreclient"
	"github.com/configwave/configwave/internal/kubeclient"
	"github.com/configwave/configwave/internal/notify"
	"github.com/configwave/configwave/internal/podevents"
	"github.com/configwave/configwave/internal/reload"
	"github.com/configwave/configwave/internal/serve"
	"github.com/configwave/configwave/internal/source"
	"github.com/configwave/configwave/internal/supervise"
	"github.com/configwave/configwave/internal/unpack"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() {
	os.Exit(runMain(os.Args[1:]))
}

func runMain(args []string) int {
	return runMainEnv(args, os.Getenv)
}

func runMainEnv(args []string, getenv func(string) string) int {
	var o options
	if len(args) == 0 {
		sidecar, notes, ok, err := k8sSidecarArgs(getenv)
		if err != nil {
			fmt.Fprintf(os.Stderr, "reloader: %v\n", err)
			return 2
		}
		if ok {
			args, o.notes = sidecar, append([]string{"started with k8s-sidecar's environment, read as " + strings.Join(redactArgs(sidecar), " ")}, notes...)
		}
	}
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
	applyPromProcessSettings(cfg)
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

// run1 wires the parts and runs them until one of them stops.
func run1(cfg *config) error {
	reg := serve.NewRegistry("reloader", cli.Version(version))
	metrics := reload.NewMetrics(reg)
	r := &reload.Reloader{
		Debounce:       cfg.debounce,
		RetryInterval:  cfg.retry,
		UnhealthyAfter: cfg.unhealthy,
		Metrics:        metrics,
	}
	var cmr *compat.ConfigmapReload
	var pcr *compat.PrometheusConfigReloader
	switch cfg.peer {
	case peerConfigmapReload:
		cmr = compat.NewConfigmapReload(reg)
		for _, h := range cfg.httpURLs {
			h.OnTry, h.OnDone = cmr.Try, cmr.Done
		}
	case peerPrometheusConfigReloader:
		method := "http"
		if cfg.process != nil {
			method = "signal"
		}
		pcr = compat.NewPrometheusConfigReloader(reg, method)
		r.Observer = pcr
	}
	var src interface {
		reload.Source
		Run(context.Context)
	}
	var events *podevents.Recorder
	if len(cfg.folders) > 0 {
		// Mounted folders: no API client at all, so the pod needs no token.
		opts := cfg.folderOpts
		opts.OnEvent = func() {
			metrics.FolderEvents.Inc()
			if pcr != nil {
				pcr.WatchEvent()
			}
		}
		opts.OnError = func(error) {
			metrics.FolderWatchErrors.Inc()
			if cmr != nil {
				cmr.WatcherError()
			}
			if pcr != nil {
				pcr.WatchError()
			}
		}
		opts.OnWatches = func(n int) {
			metrics.FolderWatches.Set(float64(n))
			if pcr != nil {
				pcr.Watches(n)
			}
		}
		folders, err := source.NewFolders(cfg.folders, opts)
		if err != nil {
			return fmt.Errorf("--volume-dir: %w", err)
		}
		src = folders
		r.Layout = reload.Mounted{}
		inPlace := reload.InPlace{Dir: cfg.folders[0], Reread: func() (map[string]unpack.File, error) {
			files, _, err := reload.Mounted{}.Files(folders.ReadNow().Objects)
			return files, err
		}}
		r.Writer = &inPlace
		if cfg.renderIn != "" {
			rendered := &reload.Rendered{InPlace: inPlace, Input: cfg.renderIn, Output: cfg.renderOut}
			if pcr != nil {
				rendered.OnRender = pcr.Rendered
			}
			r.Writer = rendered
		}
	} else {
		restCfg, err := kubeclient.Config(cfg.kubeconfig, "configwave-reloader/"+cli.Version(version), 0, 0)
		if err != nil {
			return err
		}
		client, err := coreclient.New(restCfg)
		if err != nil {
			return err
		}
		var keep []string
		if cfg.layout.FolderAnnotation != "" {
			keep = []string{cfg.layout.FolderAnnotation}
		}
		src = source.NewAPI(client, cfg.refs, cfg.selector, source.APIOptions{
			OnWatchRestart:   func(src string) { metrics.WatchRestarts.WithLabelValues(src).Inc() },
			OnWatch:          func(src string) { metrics.WatchRestarts.WithLabelValues(src) }, // at 0 until the first restart
			Annotations:      keep,
			WatchIdleTimeout: cfg.watchIdle,
			OnWatchIdle: func(src string) {
				klog.InfoS("watch silent: no event and no bookmark; opening it again", "source", src, "for", cfg.watchIdle)
			},
		})
		layout := cfg.layout
		// Objects anyone may add by labelling one: one that cannot be laid out is left out,
		// and never freezes the others. Named objects are the app's own: all or nothing.
		layout.Isolate = cfg.selector != nil
		r.Layout = layout
		r.Writer = unpack.New(cfg.root)
		r.Told = &reload.ToldRecord{Path: filepath.Join(cfg.root, reload.ToldRecordName)}
		if events = podEvents(client); events != nil {
			r.Events = events
		}
	}
	r.Source = src
	r.TellOnStart = cfg.tellOnStart
	if cfg.http != nil {
		r.Notifier = cfg.http
	} else if cfg.process != nil {
		r.Notifier = cfg.process
		if cfg.runtimeInfoURL != "" {
			r.Notifier = &notify.RuntimeInfoConfirmed{Notifier: cfg.process, URL: cfg.runtimeInfoURL, TLS: cfg.tls}
		}
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

	// The actors that start processes (the loop with --validate-command, the supervisor) wait
	// for their exit statuses from the reaper, so the reaper stops last: only once they have
	// returned. Stopping it with the others would leave a validation command that is being
	// killed at shutdown unreaped, and the loop waiting for it forever.
	var reaper *supervise.Reaper
	var reaperUsers sync.WaitGroup
	usesReaper := func(execute func() error) func() error {
		if reaper == nil {
			return execute
		}
		reaperUsers.Add(1)
		return func() error { defer reaperUsers.Done(); return execute() }
	}
	if len(cfg.app) > 0 || cfg.validate != "" {
		var err error
		if reaper, err = supervise.NewReaper(cfg.subreaper && len(cfg.app) > 0); err != nil {
			return err
		}
		rctx, rcancel := context.WithCancel(ctx)
		g.Add(func() error { reaper.Run(rctx); return nil }, func(error) { go func() { reaperUsers.Wait(); rcancel() }() })
	}
	if cfg.validate != "" {
		check := &reload.Command{Shell: cfg.validate, Timeout: cfg.valTimeout, Reaper: reaper, ShowOutput: !hasSecrets(cfg)}
		r.Check = check.Check
	}

	{ // the source: informers, or the folder watch
		wctx, wcancel := context.WithCancel(ctx)
		g.Add(func() error { src.Run(wctx); return nil }, func(error) { wcancel() })
	}
	if events != nil {
		ectx, ecancel := context.WithCancel(ctx)
		g.Add(func() error { events.Run(ectx); return nil }, func(error) { ecancel() })
	}
	if cfg.once {
		octx, ocancel := context.WithCancel(ctx)
		g.Add(usesReaper(func() error { return r.Once(octx) }), func(error) { ocancel() })
		g.Add(run.SignalHandler(ctx, os.Interrupt, syscall.SIGTERM))
		if err := g.Run(); err != nil {
			return err
		}
		return nil
	}
	if cfg.listen != "" {
		srv, err := serve.Listen(cfg.listen, reg, serve.Checks{Ready: r.Ready, Healthy: r.Healthy, Status: func() any { return r.CurrentStatus() },
			MetricsPath: cfg.metricsPath})
		if err != nil {
			return err
		}
		klog.InfoS("serving /healthz, /readyz, /status and metrics", "address", srv.Addr(), "metricsPath", cfg.metricsPath)
		g.Add(srv.Run, srv.Stop)
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
		sctx, scancel := context.WithCancel(ctx)
		g.Add(usesReaper(func() error { return sup.Run(sctx) }), func(error) { scancel() })
	} else {
		g.Add(run.SignalHandler(ctx, os.Interrupt, syscall.SIGTERM))
	}
	{ // the loop
		lctx, lcancel := context.WithCancel(ctx)
		g.Add(usesReaper(func() error {
			if err := r.Run(lctx); err != nil {
				return err
			}
			<-lctx.Done() // Run returns early only on error; otherwise wait to be stopped
			return nil
		}), func(error) { lcancel() })
	}
	klog.InfoS("reloader started", "version", cli.Version(version), "sources", len(cfg.refs), "selector", cfg.selector != nil, "folders", cfg.folders,
		"configroot", cfg.root, "subprocess", len(cfg.app) > 0, "reloadHTTP", cfg.http != nil, "reloadProcess", cfg.process != nil)
	for _, n := range cfg.notes {
		klog.InfoS(n)
	}
	return g.Run()
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

// podEvents records Events on the reloader's own pod when it runs in one ($POD_NAME and the
// namespace from the downward API), and nowhere otherwise.
func podEvents(client rest.Interface) *podevents.Recorder {
	name := os.Getenv("POD_NAME")
	if name == "" {
		return nil
	}
	return podevents.New(client, podevents.Pod{Namespace: source.DefaultNamespace(), Name: name, UID: types.UID(os.Getenv("POD_UID"))})
}
