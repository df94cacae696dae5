package reload

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the reloader's Prometheus series. They live in their own registry, passed in,
// so that tests and two reloaders in one process never share counters.
type Metrics struct {
	Reloads       *prometheus.CounterVec
	LastSuccess   prometheus.Gauge
	ConfigInfo    *prometheus.GaugeVec
	WatchRestarts *prometheus.CounterVec
	Ready         prometheus.Gauge
	// LastReloadSuccessful is for alerts, as Thanos' reloader_last_reload_successful: 0 while
	// the newest config is rejected, invalid, not written or not taken by the app.
	LastReloadSuccessful prometheus.Gauge
	// Of the folder source (--volume-dir).
	FolderEvents      prometheus.Counter
	FolderWatchErrors prometheus.Counter
	FolderWatches     prometheus.Gauge
	// LeftOut: objects the layout leaves out of the set (selector mode).
	LeftOut prometheus.Gauge
	// ReloadLatency: from a change of the sources reaching the reloader to the app told of it.
	ReloadLatency prometheus.Histogram
}

// latencyBuckets span a reload told in a millisecond to one that waited minutes for the app:
// the debounce (100 ms), Prometheus' own reload (seconds), retries (up to minutes).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// Reload results, the values of the "result" label.
const (
	ResultSuccess          = "success"           // new files live and the app told
	ResultValidationFailed = "validation_failed" // --validate-command rejected; old files kept
	ResultNotifyFailed     = "notify_failed"     // new files live, the app could not be told
	ResultInvalidConfig    = "invalid_config"    // bad key, clash: old files kept
	ResultWriteFailed      = "write_failed"      // disk error: old files kept
)

// NewMetrics registers the series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "configwave_reloader_reloads_total",
			Help: "Config changes handled, by result: success, validation_failed, notify_failed, invalid_config, write_failed.",
		}, []string{"result"}),
		LastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "configwave_reloader_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last config change that went live and was signalled to the app.",
		}),
		ConfigInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "configwave_reloader_config_info",
			Help: "Always 1; the hash label is the SHA256 of the file set currently live under --configroot (an HMAC under a random per-process key when a Secret is among the sources).",
		}, []string{"hash"}),
		WatchRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "configwave_reloader_watch_restarts_total",
			Help: "Watches of a source that ended with an error and were restarted.",
		}, []string{"source"}),
		Ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "configwave_reloader_ready",
			Help: "1 once the first config is unpacked, as /readyz reports; a rejected or failed reload later does not change it.",
		}),
		LastReloadSuccessful: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "configwave_reloader_last_reload_successful",
			Help: "1 when the newest config from the sources is live and the app took it; 0 while it is rejected, invalid, not written or not taken. Alert on this, not on readiness.",
		}),
		FolderEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "configwave_reloader_file_events_total",
			Help: "Events from the file system watcher of --volume-dir folders.",
		}),
		FolderWatchErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "configwave_reloader_file_watch_errors_total",
			Help: "Errors of the file system watcher of --volume-dir folders (inotify queue overflows among them); each one makes every folder be read again at once.",
		}),
		FolderWatches: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "configwave_reloader_file_watches",
			Help: "Folders the file system watcher watches: each --volume-dir, its subfolders and its parent.",
		}),
		LeftOut: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "configwave_reloader_objects_left_out",
			Help: "Selected objects left out of the config because they cannot be laid out (a clash, a bad key); the others keep updating. /status names them.",
		}),
	}
	m.ReloadLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "configwave_reloader_reload_duration_seconds",
		Help:    "Seconds from a change of the sources reaching the reloader to the app told of it: the debounce, the check, the swap and the retries until the app answered.",
		Buckets: latencyBuckets,
	})
	for _, r := range []string{ResultSuccess, ResultValidationFailed, ResultNotifyFailed, ResultInvalidConfig, ResultWriteFailed} {
		m.Reloads.WithLabelValues(r)
	}
	m.LastReloadSuccessful.Set(1)
	reg.MustRegister(m.Reloads, m.LastSuccess, m.ConfigInfo, m.WatchRestarts, m.Ready, m.LastReloadSuccessful,
		m.FolderEvents, m.FolderWatchErrors, m.FolderWatches, m.LeftOut, m.ReloadLatency)
	return m
}
