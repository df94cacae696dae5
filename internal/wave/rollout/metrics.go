package rollout

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/configwave/configwave/internal/wave/rolloutrecord"
)

// Metrics are wave's Prometheus series, registered in a registry passed in.
type Metrics struct {
	Reconciles *prometheus.CounterVec
	Patches    *prometheus.CounterVec
	Errors     prometheus.Counter
	Rollouts   *prometheus.CounterVec
	// Rollbacks: failed config rollouts wave undid (configwave.io/rollback-on-failure), by kind.
	Rollbacks *prometheus.CounterVec
	// TriggerLatency: from a config change reaching wave to the rollout patch written.
	TriggerLatency prometheus.Histogram
	// RolloutDuration: from the rollout patch to its outcome, by result.
	RolloutDuration *prometheus.HistogramVec
	// OnRolloutWrite, when set, sees every rollout patch, written or refused by the API server
	// (a 409 aside: that is decided again), for Stakater Reloader's series and its alert on
	// every reload.
	OnRolloutWrite func(RolloutWrite)
}

// RolloutWrite is one rollout patch as OnRolloutWrite sees it.
type RolloutWrite struct {
	Kind, Namespace, Name string
	Changed               string // what changed: configmap/NAME, ...
	OK                    bool   // written; false: the API server refused it
}

// Outcomes of config rollouts, the values of the rollouts metric's "result" label.
const (
	RolloutSucceeded = "succeeded" // every pod runs the new config
	RolloutFailed    = "failed"    // stuck past its deadline; the old pods keep serving
)

// Reconcile results, the values of the "result" label.
const (
	ResultUnchanged       = "unchanged"        // inputs equal to the recorded ones: no write
	ResultBaseline        = "baseline"         // inputs recorded on the workload's metadata; nothing rolled
	ResultRolled          = "rolled"           // template annotation written: the workload rolls
	ResultMissing         = "missing"          // required config missing; waiting for it
	ResultError           = "error"            // retried with backoff
	ResultRetry           = "retry"            // decided on a cache a moment behind (409 Conflict); tried again
	ResultIgnored         = "ignored"          // gone or not opted in
	ResultHeld            = "held"             // a rollout waits for --coalesce or the floor between rollouts
	ResultRolledBack      = "rolled-back"      // revisions on, the template undone to an earlier config: held there
	ResultPendingApproval = "pending-approval" // configwave.io/approval: manual, and this change is not approved yet
	ResultRejected        = "rejected"         // configwave.io/approval: manual, and this change was rejected
	ResultDeferred        = "deferred"         // outside the workload's rollout window: rolls when it opens
	ResultBraked          = "braked"           // a source it follows changes too often (--flapping-threshold)
	ResultIncomplete      = "incomplete"       // a source it follows is incomplete (a half-written TLS pair): waits for it (--source-ready-timeout)
	ResultResumed         = "resumed"          // a Deployment Stakater Reloader paused for its pause-period, resumed
)

// Results are every reconcile result, the series of configwave_wave_reconciles_total.
var Results = []string{ResultUnchanged, ResultBaseline, ResultRolled, ResultMissing, ResultHeld, ResultError, ResultRetry, ResultIgnored, ResultResumed, ResultRolledBack, ResultPendingApproval, ResultRejected, ResultDeferred, ResultBraked, ResultIncomplete}

// WorkloadStates are the values of the workloads gauge's "state" label: what the leader last
// judged of each workload whose rollouts it follows (wave status shows the same states).
var WorkloadStates = map[string]rolloutrecord.State{
	"up_to_date":     rolloutrecord.UpToDate,
	"rolling":        rolloutrecord.Rolling,
	"failed":         rolloutrecord.Failed,
	"missing_config": rolloutrecord.Waiting,
}

// NewMetrics registers wave's series; queueDepth, tracked and workloads are read at scrape time.
func NewMetrics(reg prometheus.Registerer, queueDepth, tracked func() float64, workloads func(rolloutrecord.State) float64) *Metrics {
	m := &Metrics{
		Reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "configwave_wave_reconciles_total",
			Help: "Workload reconciles by result: unchanged, baseline, rolled, missing, held, error, retry, ignored, resumed, rolled-back (held at an earlier config by a rollback).",
		}, []string{"result"}),
		Patches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "configwave_wave_patches_total",
			Help: "Patches sent to workloads, by kind and by what they did (baseline, rollout).",
		}, []string{"kind", "type"}),
		Errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "configwave_wave_errors_total",
			Help: "Reconciles that failed and were queued again with backoff.",
		}),
		Rollouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "configwave_wave_rollouts_total",
			Help: "Config rollouts wave caused and followed to the end, by result: succeeded, failed (seen by the leader as they happened).",
		}, []string{"result"}),
		Rollbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "configwave_wave_rollbacks_total",
			Help: "Failed config rollouts wave undid, by workload kind (configwave.io/rollback-on-failure).",
		}, []string{"kind"}),
	}
	m.TriggerLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "configwave_wave_trigger_duration_seconds",
		Help:    "Seconds from a change of a ConfigMap or Secret reaching wave to the rollout of a workload that uses it written: holds (--coalesce, floors, --update-rate) and retries included.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900},
	})
	m.RolloutDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "configwave_wave_rollout_duration_seconds",
		Help:    "Seconds from a config rollout written to its outcome, by result: succeeded (every pod runs the new config), failed.",
		Buckets: []float64{1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600},
	}, []string{"result"})
	m.Rollouts.WithLabelValues(RolloutSucceeded)
	for _, kind := range []string{"Deployment", "Rollout"} { // the kinds undone automatically
		m.Rollbacks.WithLabelValues(kind)
	}
	m.Rollouts.WithLabelValues(RolloutFailed)
	m.RolloutDuration.WithLabelValues(RolloutSucceeded)
	m.RolloutDuration.WithLabelValues(RolloutFailed)
	for label, state := range WorkloadStates {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "configwave_wave_workloads",
			Help:        "Workloads by where their pods stand with their config, as the leader last judged them: up_to_date, rolling, failed, missing_config (0 on a standby).",
			ConstLabels: prometheus.Labels{"state": label},
		}, func() float64 { return workloads(state) }))
	}
	for _, r := range Results {
		m.Reconciles.WithLabelValues(r)
	}
	reg.MustRegister(m.Reconciles, m.Patches, m.Errors, m.Rollouts, m.Rollbacks, m.TriggerLatency, m.RolloutDuration,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "configwave_wave_queue_depth", Help: "Workloads waiting in the work queue."}, queueDepth),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "configwave_wave_workloads_tracked", Help: "Opted-in workloads in the reverse index."}, tracked),
	)
	return m
}
