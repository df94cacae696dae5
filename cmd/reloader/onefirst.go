//go:build !configwave_fileonly

package main

// --rollout=one-first, in the full build: the gate over the API source, its Lease, the
// health it judges a soak by, and what it tells (Events, metrics, /status).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/reloader/onefirst"
	"github.com/configwave/configwave/internal/reloader/podevents"
	"github.com/configwave/configwave/internal/reloader/reload"
)

// oneFirst wraps src in the gate of --rollout=one-first. It reads this pod and the Lease once
// at start, so that a launch without the downward API's names or the RBAC it needs stops with
// one line naming what to add.
func oneFirst(cfg *config, client rest.Interface, src runningSource, r *reload.Reloader, reg prometheus.Registerer, podEvents *podevents.Recorder) (runningSource, []*podevents.Recorder, error) {
	pod, ns := os.Getenv("POD_NAME"), configref.DefaultNamespace()
	if pod == "" {
		return nil, nil, errors.New("--rollout=one-first needs this pod's name: add env POD_NAME (valueFrom fieldRef metadata.name) and POD_NAMESPACE (metadata.namespace) to the reloader's container")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	me, err := onefirst.ReadPod(ctx, client, ns, pod)
	if err != nil {
		return nil, nil, fmt.Errorf("--rollout=one-first reads its pod's owner and Ready condition: %w; give the reloader's ServiceAccount get on pods (config/reloader-rbac-one-first)", err)
	}
	if me.Workload == "" {
		return nil, nil, fmt.Errorf("--rollout=one-first paces the pods of one workload, and pod %s/%s has no controller: run it in a Deployment, StatefulSet, DaemonSet or Argo Rollout", ns, pod)
	}
	expiry := cfg.rollout.soak*3/2 + 15*time.Second
	m := newRolloutMetrics(reg)
	store := &onefirst.LeaseStore{Client: client, Namespace: ns, Name: onefirst.LeaseName(me.WorkloadKind, me.Workload, sourceNames(cfg)), Expiry: expiry,
		OnRequest: func(method string) { m.requests.WithLabelValues("lease", method).Inc() }}
	if _, _, err := store.Get(ctx); err != nil {
		return nil, nil, fmt.Errorf("--rollout=one-first keeps its record on a Lease: %w; give the reloader's ServiceAccount get, watch, create and update on leases (config/reloader-rbac-one-first)", err)
	}
	maxBusy, err := maxBusyFunc(ctx, cfg.rollout.maxBusy, client, ns, me)
	if err != nil {
		return nil, nil, err
	}
	recorders := []*podevents.Recorder{}
	sources := map[*podevents.Recorder]configref.Ref{}
	for _, ref := range cfg.refs {
		rec := podevents.New(client, podevents.Pod{Kind: string(ref.Kind), Namespace: ref.Namespace, Name: ref.Name})
		recorders, sources[rec] = append(recorders, rec), ref
	}
	// tell logs a message and posts it on this pod; about a content, on its ConfigMaps and
	// Secrets too, by their UIDs so that `kubectl describe` shows it (only the pod that rejects
	// a content does, so that they get one Event, not one per pod).
	tell := func(reason, message string, about *onefirst.Content) {
		klog.InfoS("warning: "+message, "pod", ns+"/"+pod, "lease", store.Name)
		if podEvents != nil {
			podEvents.Event("Warning", reason, message)
		}
		if about == nil {
			return
		}
		for _, rec := range recorders {
			if uid, ok := about.UIDs[sources[rec]]; ok {
				rec.EventAbout(uid, "Warning", reason, message)
			}
		}
	}
	readPod := func(ctx context.Context) (onefirst.PodState, error) {
		m.requests.WithLabelValues("pod", "GET").Inc()
		p, err := onefirst.ReadPod(ctx, client, ns, pod)
		return p.PodState, err
	}
	health := &onefirst.Health{
		Pod:          readPod,
		ReloadFailed: reloadFailedSince(r),
		URL:          cfg.rollout.healthURL,
		URLTimeout:   cfg.rollout.healthTimeout,
		URLFailures:  cfg.rollout.healthFailures,
		Soak:         cfg.rollout.soak,
		Poll:         time.Second,
		Clock:        time.Now,
	}
	gate := onefirst.NewGate(src, store, onefirst.Options{
		Pod: pod, Soak: cfg.rollout.soak, Expiry: expiry, MaxBusy: maxBusy, ReadPod: readPod, Failed: health.Failed, Began: health.Begin,
		Keep: onefirst.KeptFile{Path: filepath.Join(cfg.root, onefirst.KeptName)}, Record: store.Name,
		Poll:   10 * time.Second, // the Lease's watch wakes the gate; this is the safety net
		Sample: time.Second,
		Jitter: 300 * time.Millisecond,
		OnRejected: func(c onefirst.Content, why string) {
			m.rejected.Inc()
			tell("ConfigRejected", onefirst.Describe(c, why)+"; this pod put its last good config back", &c)
		},
		OnRefused: func(c onefirst.Content, why string) {
			tell("ConfigRefused", fmt.Sprintf("config %s (content %s) was rejected by another pod (%s): this pod keeps its config", c.Name, c.ID, why), nil)
		},
		OnStartedRejected: func(c onefirst.Content, why string) {
			tell("RunsRejectedConfig", fmt.Sprintf("this pod started on config %s (content %s), which another pod rejected (%s): it had no other; fix the ConfigMap or Secret", c.Name, c.ID, why), nil)
		},
	})
	m.waiting = func() float64 {
		if gate.CurrentStatus().Waiting != "" {
			return 1
		}
		return 0
	}
	m.runs = func() string { return gate.CurrentStatus().Runs }
	klog.InfoS("one pod first: the pods of this workload agree through a Lease which one takes a new config first", "workload", me.WorkloadKind+"/"+me.Workload, "lease", ns+"/"+store.Name, "soak", cfg.rollout.soak)
	for _, w := range onefirst.JudgeWarnings(me, cfg.rollout.soak, cfg.rollout.healthURL, listenPort(cfg.listen)) {
		tell("ConfigUnjudged", w, nil)
	}
	return gatedSource{gate}, recorders, nil
}

// listenPort is the port of --listen, where the reloader's own /readyz is: a readiness probe
// there judges the reloader, not the app.
func listenPort(listen string) string {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	return port
}

// gatedSource is the gate as the reload loop's source, with its part of /status.
type gatedSource struct{ *onefirst.Gate }

// RolloutStatus is the gate's part of /status.
func (g gatedSource) RolloutStatus() any { return g.CurrentStatus() }

// sourceNames are the sources the Lease is about: the named objects and the selector.
func sourceNames(cfg *config) []string {
	var names []string
	for _, r := range cfg.refs {
		names = append(names, r.String())
	}
	if s := cfg.selector; s != nil {
		names = append(names, fmt.Sprintf("selector %v %s %v", s.Kinds, s.Labels, s.Namespaces))
	}
	return names
}

// maxBusyFunc resolves --rollout-max-unavailable: a count at once, a percentage against the
// workload's replicas, read at start (so that missing RBAC stops the start) and again at most
// every 30 s.
func maxBusyFunc(ctx context.Context, value string, client rest.Interface, ns string, me onefirst.Pod) (func() int, error) {
	if !onefirst.IsPercent(value) {
		n, err := onefirst.MaxUnavailable(value, 0)
		return func() int { return n }, err
	}
	replicas, err := onefirst.Replicas(ctx, client, ns, me.WorkloadKind, me.Workload)
	if err != nil {
		return nil, fmt.Errorf("%w; give the reloader's ServiceAccount get on the workload, or a count in --rollout-max-unavailable", err)
	}
	var mu sync.Mutex
	read := time.Now()
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(read) > 30*time.Second {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if n, err := onefirst.Replicas(ctx, client, ns, me.WorkloadKind, me.Workload); err == nil {
				replicas = n
			}
			read = time.Now()
		}
		n, _ := onefirst.MaxUnavailable(value, replicas)
		return n
	}, nil
}

// reloadFailedSince reads the reload loop's result: a change it could not lay out or tell the
// app of since the content was laid out fails the soak. The reason names the result only:
// the log line beside it has the detail, which may quote the config.
func reloadFailedSince(r *reload.Reloader) func(time.Time) string {
	return func(since time.Time) string {
		st := r.CurrentStatus()
		if st.FailingSince != nil && !st.FailingSince.Before(since) {
			return "the app refused the reload request (see the reloader's log)"
		}
		if st.LastResult != "" && st.LastResult != reload.ResultSuccess && !st.Since.Before(since) {
			return "the reloader's result was " + st.LastResult + " (see the reloader's log)"
		}
		return ""
	}
}

// rolloutMetrics are --rollout=one-first's series.
type rolloutMetrics struct {
	rejected prometheus.Counter
	requests *prometheus.CounterVec
	waiting  func() float64
	runs     func() string // where the content this pod runs stands (onefirst.RunsStates)
}

func newRolloutMetrics(reg prometheus.Registerer) *rolloutMetrics {
	m := &rolloutMetrics{
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "configwave_reloader_rollout_rejected_total",
			Help: "Contents this pod tried first or in a batch under --rollout=one-first and rejected, its app having failed on them.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "configwave_reloader_rollout_api_requests_total",
			Help: "API requests of --rollout=one-first (the Lease it shares with the workload's other sidecars, its own pod), by object and method.",
		}, []string{"object", "method"}),
		waiting: func() float64 { return 0 },
		runs:    func() string { return "" },
	}
	reg.MustRegister(m.rejected, m.requests, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "configwave_reloader_rollout_waiting",
		Help: "1 while a newer content of the sources waits, under --rollout=one-first, for its turn in this pod (tried elsewhere, a full batch, or rejected).",
	}, func() float64 { return m.waiting() }))
	for _, state := range onefirst.RunsStates {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "configwave_reloader_rollout_runs",
			Help:        "1 for where the config this pod runs stands under --rollout=one-first: promoted (judged healthy, or what the pods ran before any change), trial (this pod soaks it now), untried (laid out without a soak while it is tried elsewhere), rejected (a pod's app failed on it, and this pod has no other).",
			ConstLabels: prometheus.Labels{"state": state},
		}, func() float64 {
			if m.runs() == state {
				return 1
			}
			return 0
		}))
	}
	return m
}

// rolloutConfig is --rollout and its tuning, checked.
type rolloutConfig struct {
	oneFirst  bool
	soak      time.Duration
	maxBusy   string // a count or a percentage (onefirst.MaxUnavailable)
	healthURL string
	// healthTimeout bounds one --health-url request; healthFailures failed in a row fail a soak.
	healthTimeout  time.Duration
	healthFailures int
}

// name is the --rollout value, for the start-up log line.
func (c rolloutConfig) name() string {
	if c.oneFirst {
		return rolloutOneFirst
	}
	return rolloutAllAtOnce
}
