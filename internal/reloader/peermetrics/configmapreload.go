// Package peermetrics keeps what the users of a peer sidecar (configmap-reload,
// prometheus-config-reloader) see under the peer's own names, as a thin adapter over the
// reloader's one pipeline: metric series that existing dashboards and alerts read. One file
// per peer.
//
//	m := peermetrics.NewConfigmapReload(reg)
//	h := &notify.HTTP{URL: u, OnTry: m.Try, OnDone: m.Done}
package peermetrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ConfigmapReload are jimmidyson/configmap-reload's series, with its names, labels and meaning:
// "webhook" is the URL as shown (password and query values hidden).
type ConfigmapReload struct {
	lastReloadError *prometheus.GaugeVec
	requestDuration *prometheus.GaugeVec
	successReloads  *prometheus.CounterVec
	requestErrors   *prometheus.CounterVec
	watcherErrors   prometheus.Counter
	requests        *prometheus.CounterVec
}

// NewConfigmapReload registers configmap-reload's series with reg.
func NewConfigmapReload(reg prometheus.Registerer) *ConfigmapReload {
	const ns = "configmap_reload"
	m := &ConfigmapReload{
		lastReloadError: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "last_reload_error",
			Help: "Whether the last reload resulted in an error (1 for error, 0 for success)"}, []string{"webhook"}),
		requestDuration: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "last_request_duration_seconds",
			Help: "Duration of last webhook request"}, []string{"webhook"}),
		successReloads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "success_reloads_total",
			Help: "Total success reload calls"}, []string{"webhook"}),
		requestErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "request_errors_total",
			Help: "Total request errors by reason"}, []string{"webhook", "reason"}),
		watcherErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "watcher_errors_total",
			Help: "Total filesystem watcher errors"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "requests_total",
			Help: "Total requests by response status code"}, []string{"webhook", "status_code"}),
	}
	reg.MustRegister(m.lastReloadError, m.requestDuration, m.successReloads, m.requestErrors, m.watcherErrors, m.requests)
	return m
}

// Try counts one request as configmap-reload does: by status code when an answer came, and as
// an error (client_request_do: no answer; client_response: not a success) when it failed.
func (m *ConfigmapReload) Try(url string, code int, err error) {
	if code != 0 {
		m.requests.WithLabelValues(url, strconv.Itoa(code)).Inc()
	}
	if err == nil {
		return
	}
	reason := "client_response"
	if code == 0 {
		reason = "client_request_do"
	}
	m.requestErrors.WithLabelValues(url, reason).Inc()
	m.lastReloadError.WithLabelValues(url).Set(1)
}

// Done records the end of one reload of url: success, or its tries exhausted.
func (m *ConfigmapReload) Done(url string, err error, took time.Duration) {
	if err != nil {
		m.requestErrors.WithLabelValues(url, "retries_exhausted").Inc()
		m.lastReloadError.WithLabelValues(url).Set(1)
		return
	}
	m.requestDuration.WithLabelValues(url).Set(took.Seconds())
	m.successReloads.WithLabelValues(url).Inc()
	m.lastReloadError.WithLabelValues(url).Set(0)
}

// WatcherError counts one error of the file system watcher.
func (m *ConfigmapReload) WatcherError() { m.watcherErrors.Inc() }
