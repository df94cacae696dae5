package main

// What runs while wave holds the Lease: the controller (or Stakater Reloader's --webhook-url
// hook), its actors, and the leader loop that starts and stops them.

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/wave/access"
	"github.com/configwave/configwave/internal/wave/alert"
	"github.com/configwave/configwave/internal/wave/csi"
	"github.com/configwave/configwave/internal/wave/leader"
	"github.com/configwave/configwave/internal/wave/pacing"
	"github.com/configwave/configwave/internal/wave/profiling"
	"github.com/configwave/configwave/internal/wave/revisionhook"
	"github.com/configwave/configwave/internal/wave/rollout"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/sourceready"
	"github.com/configwave/configwave/internal/wave/stakatermetrics"
	"github.com/configwave/configwave/internal/wave/waveclient"
)

// work is what the leader runs: the controller, or in Reloader's --webhook-url mode the hook
// that tells the webhook of every change and writes nothing.
type work struct {
	ctrl    *rollout.Controller
	hook    *rollout.ChangeHook // nil but in --webhook-url mode
	run     func(context.Context) error
	leading func() bool
}

func newWork(cfg *config, cl *clients, inf *rollout.Informers, recorder record.EventRecorder, reg *prometheus.Registry, digestKey []byte, stakater *stakatermetrics.StakaterReloader, adopt *revisionhook.Adopter) (*work, error) {
	w := &work{}
	metrics := rollout.NewMetrics(reg, func() float64 { return w.ctrl.QueueDepth() }, func() float64 { return w.ctrl.Tracked() },
		func(s rolloutrecord.State) float64 { return w.ctrl.Workloads(s) })
	metrics.OnRolloutWrite = func(rw rollout.RolloutWrite) {
		stakater.Rollout(rw.Namespace, rw.OK)
		if rw.OK && cfg.reloadAlerts != nil {
			cfg.reloadAlerts.Send(cfg.reloadAlertEnv.Message(rw.Changed, rw.Kind, rw.Namespace, rw.Name))
		}
	}
	rc := rollout.Config{Client: cl.kube, Dynamic: cl.all.Dynamic, Informers: inf, Recorder: recorder, Metrics: metrics, Format: cfg.format, HashKey: cfg.hashKey, DigestKey: digestKey, DryRun: cfg.dryRun, PodClient: cl.pods,
		AllowCrossNamespaceRefs: cfg.crossNamespace, Revisions: cfg.configRevisions, RolloutDeadline: cfg.rolloutDeadline, Dialects: cfg.dialects,
		Coalesce: cfg.coalesce, MinRolloutInterval: cfg.minInterval, RolloutWindow: cfg.window, SourceReadyTimeout: cfg.sourceReadyTimeout, Flapping: cfg.flappingRule, InFlight: pacing.InFlight{Max: cfg.maxInFlight, MaxPerNamespace: cfg.maxInFlightPerNamespace}, UpdateRate: cfg.updateRate, UpdateBurst: cfg.updateBurst, Reloader: cfg.stakaterOpts,
		Passive: cfg.changeWebhook != nil}
	if cfg.webhook != nil {
		rc.Alert = cfg.webhook.Send
	}
	if adopt != nil {
		rc.Adopt, rc.Unadopt = adopt.Add, adopt.Forget
	}
	if cfg.revisionsWebhookAddress != "" {
		// The pods its webhook missed (wave down, a failed call) are said every sync period.
		rc.LivePodsEvery = cfg.syncPeriod
	}
	var err error
	if w.ctrl, err = rollout.NewController(rc); err != nil {
		return nil, err
	}
	w.run = func(ctx context.Context) error { return w.ctrl.Run(ctx, cfg.workers) }
	w.leading = w.ctrl.Leading
	if cfg.changeWebhook != nil {
		w.hook = &rollout.ChangeHook{Informers: inf, Reloader: cfg.stakaterOpts, Send: cfg.changeWebhook.Send}
		if err := w.hook.Register(); err != nil {
			return nil, err
		}
		w.run, w.leading = w.hook.Run, w.hook.Leading
	}
	registerWorkGauges(cfg, reg, w)
	return w, nil
}

func registerWorkGauges(cfg *config, reg *prometheus.Registry, w *work) {
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "configwave_wave_alerts_dropped_total",
		Help: "Alerts (--notify-webhook, ALERT_ON_RELOAD, --webhook-url) never delivered: the queue full, every try failed, or still queued when the grace period after a stop ended."},
		func() float64 {
			n := int64(0)
			for _, wh := range []*alert.Webhook{cfg.webhook, cfg.reloadAlerts, cfg.changeWebhook} {
				if wh != nil {
					n += wh.Dropped()
				}
			}
			return float64(n)
		}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "configwave_wave_rollouts_held",
		Help: "Workloads whose rollout waits for --coalesce or for their floor between rollouts."}, w.ctrl.Held))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "configwave_wave_workloads_held_by_rollback",
		Help: "Workloads with configwave.io/revisions whose template a rollback (rollout undo, an abort) holds at an earlier config; each rolls forward on its config's next change."}, w.ctrl.HeldByRollback))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "configwave_wave_rollouts_queued",
		Help: "Config rollouts waiting for one under way to finish (--max-rollouts-in-flight)."}, w.ctrl.RolloutsQueued))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "configwave_wave_sources_braked",
		Help: "ConfigMaps and Secrets that change too often (--flapping-threshold): the workloads that follow them do not roll for them until they are quiet."}, w.ctrl.SourcesBraked))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "configwave_wave_approvals_pending",
		Help: "Workloads with configwave.io/approval: manual whose config change waits for approval (kubectl configwave approve)."}, w.ctrl.PendingApproval))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "configwave_wave_approval_pending_oldest_seconds",
		Help: "How long the oldest config change waiting for approval has waited; 0 when none waits."}, w.ctrl.OldestPendingApproval))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "configwave_wave_leader",
		Help: "1 while this replica leads and reconciles (always, without --leader-election), else 0."}, func() float64 {
		if w.leading() {
			return 1
		}
		return 0
	}))
}

// waveActors is what runs, each part with what stops it. On a stop the controller drains first
// (its workers finish their items, which may still read the caches and send alerts); the
// informers and the alert queues stop after it.
func waveActors(ctx context.Context, cfg *config, cl *clients, inf *rollout.Informers, w *work, ep *endpoints) (*run.Group, error) {
	g := &run.Group{}
	g.Add(run.SignalHandler(ctx, os.Interrupt, syscall.SIGTERM))
	controllerDone := make(chan struct{})
	afterController := func(stop func()) func(error) {
		return func(error) { go func() { <-controllerDone; stop() }() }
	}
	for _, wh := range []*alert.Webhook{cfg.reloadAlerts, cfg.webhook, cfg.changeWebhook} {
		if wh != nil {
			actx, acancel := context.WithCancel(ctx)
			g.Add(func() error { return wh.Run(actx) }, afterController(acancel))
		}
	}
	if cfg.stakater.enablePprof {
		prof, err := profiling.Listen(cfg.stakater.pprofAddr)
		if err != nil {
			return nil, err
		}
		klog.InfoS("serving Go's profiles on /debug/pprof/", "address", prof.Addr())
		g.Add(prof.Run, prof.Stop)
	}
	{ // informers: every replica keeps warm caches, so a new leader starts at once
		ictx, icancel := context.WithCancel(ctx)
		g.Add(func() error {
			startInformers(ictx, inf, w.ctrl.QueueDepth, w.ctrl.Compact)
			<-ictx.Done()
			inf.Shutdown()
			return nil
		}, afterController(icancel))
	}
	{ // the controller, under leader election when asked
		cctx, ccancel := context.WithCancel(ctx)
		g.Add(func() error {
			defer close(controllerDone)
			if !cfg.leaderElection {
				return w.run(cctx)
			}
			return runLeader(cctx, cfg, cl.kube, w.run)
		}, func(error) { ccancel() })
	}
	ep.add(g) // the endpoints: serving since the start, stopped with the rest
	return g, nil
}

// runLeader runs work while this process holds the Lease. Losing the Lease ends the process
// (an error), as Kubernetes components do: a fresh start is the simplest correct state.
//
// On shutdown the Lease is released only after work has returned (the controller returns once
// its workers finished their items): released earlier, a standby could start writing while a
// worker here is still in the middle of a PATCH. So the election runs on its own context,
// which is cancelled after the work, not with ctx.
func runLeader(ctx context.Context, cfg *config, client waveclient.Interface, work func(context.Context) error) error {
	host, _ := os.Hostname()
	id := fmt.Sprintf("%s_%d_%d", host, os.Getpid(), time.Now().UnixNano())
	electCtx, release := context.WithCancel(context.Background())
	defer release()
	var mu sync.Mutex
	leading, stopping := false, false
	stopAfter := context.AfterFunc(ctx, func() {
		mu.Lock()
		stopping = true
		l := leading
		mu.Unlock()
		if !l {
			release() // not leading: nothing to wait for
		} // leading: OnStartedLeading releases once the work has returned
	})
	defer stopAfter()
	errc := make(chan error, 1)
	leader.Run(electCtx, leader.Config{
		Leases:        client.CoordinationV1().Leases(cfg.leaderNamespace),
		Namespace:     cfg.leaderNamespace,
		Name:          cfg.leaderID,
		Identity:      id,
		LeaseDuration: cfg.leaseDuration,
		RenewDeadline: cfg.renewDeadline,
		RetryPeriod:   cfg.retryPeriod,
		OnStartedLeading: func(leadCtx context.Context) {
			mu.Lock()
			if stopping {
				mu.Unlock()
				return
			}
			leading = true
			mu.Unlock()
			klog.InfoS("became the leader", "lease", cfg.leaderNamespace+"/"+cfg.leaderID, "identity", id)
			// The cause tells the controller how to stop: asked to, it finishes the writes
			// under way; with the Lease lost, it abandons them (rollout.ErrLeaseLost).
			workCtx, stopWork := context.WithCancelCause(context.WithoutCancel(leadCtx))
			defer context.AfterFunc(leadCtx, func() { stopWork(rollout.ErrLeaseLost) })()
			defer context.AfterFunc(ctx, func() { stopWork(nil) })()
			errc <- work(workCtx)
			stopWork(nil)
			release() // the work has stopped: the Lease may go now
		},
		OnStoppedLeading: func() { klog.InfoS("leadership ended", "identity", id) },
		OnNewLeader: func(identity string) {
			if identity != id && identity != "" {
				klog.InfoS("another replica leads", "leader", identity)
			}
		},
	})
	mu.Lock()
	led := leading
	mu.Unlock()
	var err error
	if led {
		// RunOrDie returns as soon as the Lease is lost, with the work still stopping: return
		// only once it has, so nothing this replica started writes after it exits.
		err = <-errc
	}
	switch {
	case ctx.Err() != nil:
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("lost the lease %s/%s", cfg.leaderNamespace, cfg.leaderID)
}

// watchSecretProviderClasses follows the Secrets Store CSI driver where its CRDs are served
// (--enable-csi-integration); where they are not, it says so in one line, as Reloader does.
func watchSecretProviderClasses(ctx context.Context, inf *rollout.Informers, namespaces []string, client waveclient.Interface, dyn dynamic.Interface, restCfg *rest.Config) error {
	served, err := csi.Served(client.Discovery())
	if err != nil {
		return fmt.Errorf("--enable-csi-integration: %w", err)
	}
	if !served {
		klog.InfoS("--enable-csi-integration: the Secrets Store CSI driver's CRDs are not installed (no " + csi.PodStatuses.GroupResource().String() + "), so SecretProviderClasses are not followed; install the driver and restart wave")
		return nil
	}
	if dyn == nil { // no custom workload kind is served: no dynamic client yet
		if dyn, err = dynamic.NewForConfig(restCfg); err != nil {
			return fmt.Errorf("--enable-csi-integration: create the API client for SecretProviderClasses: %w", err)
		}
	}
	// Without list and watch on them the informers never sync and wave is never ready,
	// saying nothing: so it is checked once, here, in the namespaces wave watches.
	var checks []access.Check
	for _, gvr := range []schema.GroupVersionResource{csi.PodStatuses, csi.Classes} {
		checks = append(checks, access.Each(namespaces, gvr.Group, gvr.Resource, "list", "watch")...)
	}
	if err := access.Require(ctx, client, "--enable-csi-integration reads the Secrets Store CSI driver's objects",
		"grant get, list and watch on secretproviderclasspodstatuses and secretproviderclasses (the chart's enableCSIIntegration, or config/wave-csi), or drop the flag", checks...); err != nil {
		return err
	}
	if err := inf.WatchSecretProviderClasses(dyn); err != nil {
		return fmt.Errorf("--enable-csi-integration: %w", err)
	}
	klog.InfoS("following SecretProviderClasses through their pods' statuses (--enable-csi-integration)")
	return nil
}

// watchSecretWriters follows cert-manager's Certificates and External Secrets' ExternalSecrets
// where they are served and wave may read them, so that a rollout waits until they say the
// Secret they write is done (--source-ready-timeout). Neither is required: in a namespace where
// wave may not read one, one line says what to grant, and it waits only for what it sees (a TLS
// pair). A kind installed, or granted, after wave started is read after its restart.
func watchSecretWriters(ctx context.Context, inf *rollout.Informers, namespaces []string, client waveclient.Interface, dyn dynamic.Interface, restCfg *rest.Config) error {
	served, err := sourceready.ServedWriters(client.Discovery())
	if err != nil {
		return fmt.Errorf("--wait-for-secret-writers: %w", err)
	}
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, w := range sourceready.Writers {
		gvr, ok := served[w.Kind]
		if !ok {
			continue
		}
		var allowed []string
		for _, ns := range namespaces {
			missing, err := access.Missing(ctx, client, access.Each([]string{ns}, gvr.Group, gvr.Resource, "list", "watch")...)
			if err != nil {
				return fmt.Errorf("--wait-for-secret-writers: %w", err)
			}
			if len(missing) > 0 {
				klog.InfoS("wave may not list and watch a Secret writer's kind, so a change of a Secret they write does not wait for their status there: grant get, list and watch on them, or give --wait-for-secret-writers=false",
					"resource", gvr.GroupResource().String(), "denied", missing[0].String(), "grant", secretWriterGrant[w.Kind])
				continue
			}
			allowed = append(allowed, ns)
		}
		if len(allowed) == 0 {
			continue
		}
		if dyn == nil {
			if dyn, err = dynamic.NewForConfig(restCfg); err != nil {
				return fmt.Errorf("--wait-for-secret-writers: create the API client for %s: %w", gvr.GroupResource(), err)
			}
		}
		inf.WatchSecretWriters(dyn, w.Kind, gvr, allowed)
		klog.InfoS("a rollout of a change of a Secret waits until its writer says it is done (--source-ready-timeout)", "writers", gvr.GroupResource().String(), "version", gvr.Version)
	}
	return nil
}

// secretWriterGrant is where each writer kind's read access is granted.
var secretWriterGrant = map[sourceready.WriterKind]string{
	sourceready.Certificate:    "config/wave-cert-manager, or the chart's waitForSecretWriters, which grants it where cert-manager's CRDs are installed",
	sourceready.ExternalSecret: "config/wave-external-secrets, or the chart's waitForSecretWriters, which grants it where External Secrets' CRDs are installed",
}
