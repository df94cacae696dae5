// Package stakatermetrics keeps Stakater Reloader's metric series under its names, for the
// dashboards and alerts of its users once wave replaces it.
package stakatermetrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// StakaterReloader are Stakater Reloader's series, under its names and labels, exported beside
// wave's so that its chart's ServiceMonitor, dashboards and alerts keep working after the image
// is swapped: one count per rollout, success "true" or "false", and, with its chart's
// enableMetricsByNamespace (METRICS_COUNT_BY_NAMESPACE=enabled), the same by namespace.
type StakaterReloader struct {
	executed, byNamespace *prometheus.CounterVec
}

// NewStakaterReloader registers the series with reg.
func NewStakaterReloader(reg prometheus.Registerer, byNamespace bool) *StakaterReloader {
	m := &StakaterReloader{executed: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "reloader", Name: "reload_executed_total", Help: "Counter of reloads executed by Reloader.",
	}, []string{"success"})}
	m.executed.WithLabelValues("true")
	m.executed.WithLabelValues("false")
	reg.MustRegister(m.executed)
	if byNamespace {
		m.byNamespace = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "reloader", Name: "reload_executed_total_by_namespace", Help: "Counter of reloads executed by Reloader by namespace.",
		}, []string{"success", "namespace"})
		reg.MustRegister(m.byNamespace)
	}
	return m
}

// Rollout counts one rollout wave wrote (ok) or failed to write.
func (m *StakaterReloader) Rollout(namespace string, ok bool) {
	success := strconv.FormatBool(ok)
	m.executed.WithLabelValues(success).Inc()
	if m.byNamespace != nil {
		m.byNamespace.WithLabelValues(success, namespace).Inc()
	}
}
