package peermetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/configwave/configwave/internal/reloader/reload"
)

// PrometheusConfigReloader are the series of the Prometheus Operator's prometheus-config-reloader
// (Thanos' pkg/reloader), with their names: the operator's ConfigReloaderSidecarErrors alert
// reads reloader_last_reload_successful.
type PrometheusConfigReloader struct {
	reloads, reloadErrors  prometheus.Counter
	lastSuccess, lastTime  prometheus.Gauge
	applies, applyErrors   prometheus.Counter
	envErrors              prometheus.Gauge
	watches                prometheus.Gauge
	watchEvents, watchErrs prometheus.Counter
	info                   *prometheus.GaugeVec
}

// NewPrometheusConfigReloader registers the series with reg; method is "http" or "signal".
func NewPrometheusConfigReloader(reg prometheus.Registerer, method string) *PrometheusConfigReloader {
	m := &PrometheusConfigReloader{
		reloads:      prometheus.NewCounter(prometheus.CounterOpts{Name: "reloader_reloads_total", Help: "Total number of reload requests."}),
		reloadErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "reloader_reloads_failed_total", Help: "Total number of reload requests that failed."}),
		lastSuccess:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "reloader_last_reload_successful", Help: "Whether the last reload attempt was successful"}),
		lastTime:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "reloader_last_reload_success_timestamp_seconds", Help: "Timestamp of the last successful reload"}),
		applies:      prometheus.NewCounter(prometheus.CounterOpts{Name: "reloader_config_apply_operations_total", Help: "Total number of config apply operations."}),
		applyErrors:  prometheus.NewCounter(prometheus.CounterOpts{Name: "reloader_config_apply_operations_failed_total", Help: "Total number of config apply operations that failed."}),
		envErrors: prometheus.NewGauge(prometheus.GaugeOpts{Name: "reloader_config_environment_variable_expansion_errors",
			Help: "Number of environment variable expansions that failed during the last operation."}),
		watches:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "reloader_watches", Help: "Number of resources watched by the reloader."}),
		watchEvents: prometheus.NewCounter(prometheus.CounterOpts{Name: "reloader_watch_events_total", Help: "Total number of events received by the reloader from the watcher."}),
		watchErrs:   prometheus.NewCounter(prometheus.CounterOpts{Name: "reloader_watch_errors_total", Help: "Total number of errors received by the reloader from the watcher."}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "reloader_info",
			Help: "A metric with a constant '1' value labeled by reload method (either 'http' or 'signal')."}, []string{"method"}),
	}
	reg.MustRegister(m.reloads, m.reloadErrors, m.lastSuccess, m.lastTime, m.applies, m.applyErrors, m.envErrors,
		m.watches, m.watchEvents, m.watchErrs, m.info)
	m.info.WithLabelValues(method).Set(1)
	// Nothing has failed yet. (Thanos starts at 0 until its first reload, which without
	// --config-file comes at the first change or after --watch-interval: an alert in between
	// would be false.)
	m.lastSuccess.Set(1)
	return m
}

// Pass implements reload.Observer: one apply operation per pass, one reload per telling.
func (m *PrometheusConfigReloader) Pass(p reload.PassReport) {
	if p.Applied || p.ApplyErr != nil {
		m.applies.Inc()
		if p.ApplyErr != nil {
			m.applyErrors.Inc()
		}
	}
	if p.Told || p.TellErr != nil {
		m.reloads.Inc()
	}
	switch {
	case p.TellErr != nil:
		m.reloadErrors.Inc()
		m.lastSuccess.Set(0)
	case p.Told:
		m.lastSuccess.Set(1)
		m.lastTime.SetToCurrentTime()
	}
}

// Rendered records how many referenced environment variables were not set in the last render.
func (m *PrometheusConfigReloader) Rendered(unset int) { m.envErrors.Set(float64(unset)) }

// Watches records how many folders are watched.
func (m *PrometheusConfigReloader) Watches(n int) { m.watches.Set(float64(n)) }

// WatchEvent counts one event of the file system watcher.
func (m *PrometheusConfigReloader) WatchEvent() { m.watchEvents.Inc() }

// WatchError counts one error of the file system watcher.
func (m *PrometheusConfigReloader) WatchError() { m.watchErrs.Inc() }
