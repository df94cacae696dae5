package testcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The Prometheus Operator's CustomResourceDefinitions for what the chart renders
// (ServiceMonitor, PodMonitor, PrometheusRule), read from the operator's Go module, so that the
// chart's monitoring objects are checked against the operator's own schema. The operator itself
// does not run: nothing here scrapes.
const (
	prometheusOperatorModule  = "github.com/prometheus-operator/prometheus-operator"
	PrometheusOperatorVersion = "v0.85.0"
)

var prometheusOperatorKinds = []string{"servicemonitors", "podmonitors", "prometheusrules"}

// PrometheusOperatorCRDs downloads the operator's module (once, into the module cache) and
// returns the CRD files of the kinds the chart renders.
func PrometheusOperatorCRDs(ctx context.Context) ([]string, error) {
	dir, err := downloadModule(ctx, append(os.Environ(), "GOFLAGS=-mod=readonly"), prometheusOperatorModule, PrometheusOperatorVersion)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, kind := range prometheusOperatorKinds {
		f := filepath.Join(dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+kind+".yaml")
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("the CRD of %s in %s@%s: %w", kind, prometheusOperatorModule, PrometheusOperatorVersion, err)
		}
		files = append(files, f)
	}
	return files, nil
}

// InstallPrometheusOperatorCRDs installs ServiceMonitor, PodMonitor and PrometheusRule for the
// test; they are deleted when it ends.
func InstallPrometheusOperatorCRDs(t testing.TB, c *Cluster) {
	t.Helper()
	installModuleCRDs(t, c, "Prometheus Operator", PrometheusOperatorCRDs)
}
