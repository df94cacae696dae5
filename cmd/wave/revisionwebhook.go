package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/process/serve"
	"github.com/configwave/configwave/internal/wave/revisionhook"
	"github.com/configwave/configwave/internal/wave/rollout"
	"github.com/configwave/configwave/internal/wave/webhookcert"
	"github.com/configwave/configwave/internal/wave/workload"
)

// revisionWebhookPath is where the MutatingWebhookConfiguration sends pods (docs/revisions.md).
const revisionWebhookPath = "/mutate-pods"

// startRevisionWebhook serves the admission webhook that points the pods of a revision at
// their snapshots, on every replica (leader or not: the API server may call any), from the
// start: it reads the API server, not the caches. Without --revisions-webhook-address it
// serves nothing (nil). A pod it cannot help is still admitted,
// and an Event on its workload (once per revision and reason) says it reads live.
func startRevisionWebhook(ctx context.Context, cfg *config, cl *clients, reg *prometheus.Registry, adopt *revisionhook.Adopter, inf func() *rollout.Informers, recorder record.EventRecorder) (*serve.Server, error) {
	if cfg.revisionsWebhookAddress == "" {
		return nil, nil
	}
	trusted := prometheus.NewGauge(prometheus.GaugeOpts{Name: "configwave_wave_revisions_webhook_ca_trusted",
		Help: "1 when the webhook's registration (--revisions-webhook-configuration) carries the newest CA of wave's certificate (--revisions-webhook-cert-secret), 0 when wave could not put it there (the log says why): a replica that starts meanwhile serves a certificate the API server does not trust, and its calls admit pods on the live objects."})
	if cfg.webhookCertName != "" && cfg.revisionsWebhookConfiguration != "" {
		reg.MustRegister(trusted) // only where wave keeps the caBundle: a 0 elsewhere would alarm
	}
	tlsConfig, from, err := webhookCertificate(ctx, cfg, cl, func(ok bool) {
		if ok {
			trusted.Set(1)
		} else {
			trusted.Set(0)
		}
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.revisionsWebhookAddress)
	if err != nil {
		return nil, fmt.Errorf("--revisions-webhook-address %s: %w", cfg.revisionsWebhookAddress, err)
	}
	h := &revisionhook.Handler{Look: &revisionhook.APILook{Core: cl.webhook.CoreV1()}, Adopt: adopt, Tell: func(pod *corev1.Pod, why string) {
		kind, name := revisionhook.WorkloadOf(pod)
		i := inf()
		if kind == "" || i == nil {
			return
		}
		if w, ok := i.Workload(workload.Kind(kind), pod.Namespace, name); ok {
			recorder.Event(w.Object, corev1.EventTypeWarning, "ConfigRevisionLive", why)
		}
	}}
	mux := http.NewServeMux()
	mux.Handle(revisionWebhookPath, h)
	srv := serve.New(tls.NewListener(ln, tlsConfig), mux)
	// The API server sends a review at once and waits for the answer at most its
	// timeoutSeconds (at most 30 s): a client slower than that is no API server.
	srv.Bound(5*time.Second, 10*time.Second, 30*time.Second, 90*time.Second, 64<<10)
	klog.InfoS("serving the config revisions webhook", "address", srv.Addr(), "path", revisionWebhookPath, "certificate", from)
	return srv, nil
}

// startAdopter starts what gives a revision's snapshots and index their owner reference to
// the revision object: asked by the webhook at each new pod of a revision, and by wave's
// controller once per revision (a revision with no pod, or whose pods the webhook missed). On
// the webhook's client where there is one, else wave's own.
func startAdopter(ctx context.Context, cl *clients, reg *prometheus.Registry) *revisionhook.Adopter {
	// Registered whether or not the webhook is served, as every series wave has.
	failed := prometheus.NewCounter(prometheus.CounterOpts{Name: "configwave_wave_revision_owner_failures_total",
		Help: "Owner references to a revision that wave could not add to a snapshot or index (the log says why): that object stays until deleted by hand."})
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "configwave_wave_revision_owner_dropped_total",
		Help: "Owner references to a revision that waited behind too many others and were dropped: the revision's next pod, or wave's next look at the workload, asks again."})
	reg.MustRegister(failed, dropped)
	client := cl.webhook
	if client == nil {
		client = cl.kube
	}
	adopt := &revisionhook.Adopter{Client: client, Failed: failed.Inc, Dropped: dropped.Inc}
	go func() { _ = adopt.Run(ctx) }() // best effort: asked again by the revision's next pod
	return adopt
}

// webhookCertificate is what the webhook serves: the certificate wave keeps in
// --revisions-webhook-cert-secret, made or read before the first request, and looked at again
// in the background; else the one mounted in --revisions-webhook-cert-dir.
func webhookCertificate(ctx context.Context, cfg *config, cl *clients, trusted func(bool)) (*tls.Config, string, error) {
	if cfg.webhookCertName == "" {
		keys := &revisionhook.KeyPair{Dir: cfg.revisionsWebhookCertDir}
		if err := keys.Load(); err != nil {
			return nil, "", err
		}
		return keys.TLSConfig(), "folder " + cfg.revisionsWebhookCertDir, nil
	}
	svc := cfg.revisionsWebhookService + "." + cfg.webhookCertNS + ".svc"
	k := &webhookcert.Keeper{Client: cl.kube, Namespace: cfg.webhookCertNS, Name: cfg.webhookCertName,
		Configuration: cfg.revisionsWebhookConfiguration, DNSNames: []string{svc, svc + ".cluster.local"}, Trusted: trusted}
	if err := k.Sync(ctx); errors.Is(err, webhookcert.ErrRegistration) {
		// Served all the same: the registration may come after wave (Helm creates it after
		// the Deployment); it is looked at again soon.
		klog.ErrorS(err, "the revisions webhook's CA is not in its registration yet")
	} else if err != nil {
		return nil, "", fmt.Errorf("--revisions-webhook-cert-secret: %w", err)
	}
	go k.Run(ctx)
	return k.TLSConfig(), "Secret " + cfg.webhookCertNS + "/" + cfg.webhookCertName + ", kept by wave", nil
}
