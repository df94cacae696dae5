package main

// wave's API clients and what is made from them: the caches and the Event recorder.

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/kubeclient"
	"github.com/configwave/configwave/internal/process/startup"
	"github.com/configwave/configwave/internal/wave/rollout"
	"github.com/configwave/configwave/internal/wave/waveclient"
	"github.com/configwave/configwave/internal/wave/workload"
)

// clients are wave's API clients: one for config and workloads (the hot path), one for Events
// and one for pods, each on its own rate limit and counted apart.
type clients struct {
	rest   *rest.Config
	kube   waveclient.Interface
	all    workload.Clients
	kinds  []workload.Type
	events waveclient.Interface
	pods   waveclient.Interface // nil without --crash-loop-detection
	// webhook reads and adopts for the revisions webhook: on a rate limit of its own, so that
	// a burst of pods (a scale-up of hundreds) neither waits behind wave's patches and lease
	// renewals nor delays them.
	webhook waveclient.Interface
}

func newClients(cfg *config, reg *prometheus.Registry) (*clients, error) {
	restCfg, err := kubeclient.Config(cfg.kubeconfig, "configwave-wave/"+startup.Version(version), cfg.qps, cfg.burst)
	if err != nil {
		return nil, err
	}
	apiRequests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configwave_wave_api_requests_total",
		Help: "Requests sent to the API server, by HTTP method and client: workloads (config and workloads: the hot path), events, pods (crash-loop checks), webhook (the revisions webhook's reads and adoptions). Watches count once, when opened.",
	}, []string{"method", "client"})
	watchRestarts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "configwave_wave_watch_restarts_total",
		Help: "Watches opened again (dropped connection, 410 Gone, API server restart, routine timeout), by resource.",
	}, []string{"resource"})
	reg.MustRegister(apiRequests, watchRestarts)
	eventCfg, podCfg, webhookCfg := rest.CopyConfig(restCfg), rest.CopyConfig(restCfg), rest.CopyConfig(restCfg)
	for c, cfg := range map[string]*rest.Config{"workloads": restCfg, "events": eventCfg, "pods": podCfg, "webhook": webhookCfg} {
		kubeclient.CountRequests(cfg, func(m string) { apiRequests.WithLabelValues(m, c).Inc() })
	}
	kubeclient.CountWatchRestarts(restCfg, func(resource string, again bool) {
		c := watchRestarts.WithLabelValues(resource) // at 0 from the first watch on
		if again {
			c.Inc()
		}
	})
	all, kinds, err := workload.Connect(restCfg)
	if err != nil {
		return nil, err
	}
	cl := &clients{rest: restCfg, kube: all.Kube, all: all, kinds: kinds}
	// Events get a client of their own, with its own rate limit: with one shared limiter a
	// ConfigMap used by 1,000 workloads cost 2,000 requests against --kube-api-qps (a patch and
	// an Event each) and the patches waited behind the Events. Events are best effort: the
	// broadcaster drops them when its queue is full, never blocking a rollout.
	eventCfg.QPS, eventCfg.Burst, eventCfg.RateLimiter = eventQPS, eventBurst, nil
	if cl.events, err = waveclient.New(eventCfg); err != nil {
		return nil, fmt.Errorf("create the Events client: %w", err)
	}
	// Pods are read only to see a config rollout's new pods crash-loop: best effort, on a
	// rate limit of their own, never in the way of the patches.
	podCfg.QPS, podCfg.Burst, podCfg.RateLimiter = podQPS, podBurst, nil
	if cfg.crashLoopDetection {
		if cl.pods, err = waveclient.New(podCfg); err != nil {
			return nil, fmt.Errorf("create the pods client: %w", err)
		}
	}
	// The same rate as wave's own client (--kube-api-qps), on a limiter of its own.
	webhookCfg.RateLimiter = nil
	if cfg.revisionsWebhookAddress != "" {
		if cl.webhook, err = waveclient.New(webhookCfg); err != nil {
			return nil, fmt.Errorf("create the revisions webhook's client: %w", err)
		}
	}
	return cl, nil
}

// recordEvents starts the Event broadcaster; stop waits a little for the Events still queued,
// then shuts it down.
func recordEvents(ctx context.Context, client waveclient.Interface) (recorder record.EventRecorder, stop func()) {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(4)
	sink := &sinkActivity{}
	broadcaster.StartRecordingToSink(countedSink{waveclient.EventSink{Client: client}, sink})
	stop = func() {
		if n := sink.wait(eventGrace, eventQuiet); n > 0 {
			klog.InfoS("Event writes still under way at the stop, and dropped", "writes", n)
		}
		broadcaster.Shutdown()
	}
	return broadcaster.NewRecorder(waveclient.Scheme, corev1.EventSource{Component: "configwave-wave"}), stop
}

// newInformers makes the caches: workloads, ConfigMaps and Secrets as digests, and what
// Reloader's flags add (namespaces, the CSI driver's pod statuses).
func newInformers(ctx context.Context, cfg *config, cl *clients, dg digests, kinds kindAccess) (*rollout.Informers, error) {
	inf := rollout.NewInformersWithAccess(cl.all, cl.kinds, cfg.namespaceList, cfg.selector, cfg.syncPeriod, dg.digester(cfg), kinds.Func())
	if cfg.stakaterOpts.NamespaceSelector != nil {
		if err := checkNamespaceAccess(ctx, cl.kube); err != nil {
			return nil, err
		}
		inf.WatchNamespaces(cl.kube)
	} else if ok, err := mayWatchNamespaces(ctx, cl.kube); err != nil {
		return nil, err
	} else if ok {
		inf.WatchNamespaces(cl.kube) // for configwave.io/rollout-window on a namespace
	}
	if cfg.csi {
		if err := watchSecretProviderClasses(ctx, inf, cfg.namespaceList, cl.kube, cl.all.Dynamic, cl.rest); err != nil {
			return nil, err
		}
	}
	if cfg.sourceReadyTimeout > 0 && cfg.waitForSecretWriters {
		if err := watchSecretWriters(ctx, inf, cfg.namespaceList, cl.kube, cl.all.Dynamic, cl.rest); err != nil {
			return nil, err
		}
	}
	return inf, nil
}

// The Events client's own rate limit, and the pods client's.
const (
	eventQPS, eventBurst = 50, 100
	podQPS, podBurst     = 5, 10
)
