package testcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// The Prometheus Operator's CustomResourceDefinitions for what the chart renders
// (ServiceMonitor, PodMonitor, PrometheusRule), read from the operator's Go module, so that the
// chart's monitoring objects are checked against the operator's own schema; and the operator
// itself (StartPrometheusOperator), whose reloader containers the image must run. Both come from
// the version the programs module pins.
const prometheusOperatorModule = "github.com/prometheus-operator/prometheus-operator"

var prometheusOperatorKinds = []string{"servicemonitors", "podmonitors", "prometheusrules"}

// PrometheusOperatorCRDs returns the CRD files of the kinds the chart renders.
func PrometheusOperatorCRDs(ctx context.Context) ([]string, error) {
	operator, err := prometheusOperator(ctx)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, kind := range prometheusOperatorKinds {
		f := filepath.Join(operator.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+kind+".yaml")
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("the CRD of %s in %s@%s: %w", kind, operator.Path, operator.Version, err)
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

func prometheusOperator(ctx context.Context) (module, error) {
	root, err := RepoRoot(ctx)
	if err != nil {
		return module{}, err
	}
	return pinnedModule(ctx, filepath.Join(root, programsDir), prometheusOperatorModule)
}

// PrometheusOperatorBin returns the operator's binary, building it first if the cache does not
// hold it (EnsurePrograms).
func PrometheusOperatorBin(ctx context.Context, out io.Writer) (string, error) {
	p, err := EnsurePrograms(ctx, out, "operator")
	return p.Path("operator"), err
}

// AllPrometheusOperatorCRDs are every CRD the operator waits for at start.
func AllPrometheusOperatorCRDs(ctx context.Context) ([]string, error) {
	operator, err := prometheusOperator(ctx)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(operator.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_*.yaml"))
	if err != nil || len(files) < 10 {
		return nil, fmt.Errorf("the CRDs in %s@%s: found %d (%v)", operator.Path, operator.Version, len(files), err)
	}
	sort.Strings(files)
	return files, nil
}

// StartPrometheusOperator installs every CRD of the operator and runs it, on loopback, in the
// namespaces given, naming reloaderImage as its prometheus-config-reloader image. It stops,
// and the CRDs (and every object of theirs) go, when the test ends.
func StartPrometheusOperator(t testing.TB, c *Cluster, reloaderImage string, namespaces ...string) *Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	bin, err := PrometheusOperatorBin(ctx, testWriter{t})
	if err != nil {
		t.Fatalf("Prometheus Operator: %v", err)
	}
	installModuleCRDs(t, c, "Prometheus Operator", AllPrometheusOperatorCRDs)
	addr := FreeAddr(t)
	p := StartProcess(t, bin, []string{"KUBECONFIG=" + c.Kubeconfig()}, "--web.listen-address="+addr,
		"--prometheus-config-reloader="+reloaderImage, "--namespaces="+strings.Join(namespaces, ","), "--log-level=info")
	p.Addr = addr
	deadline := time.Now().Add(time.Minute)
	for code, _ := p.Get("/healthz"); code != 200; code, _ = p.Get("/healthz") {
		if p.Exited() || time.Now().After(deadline) {
			t.Fatalf("the Prometheus Operator did not become healthy:\n%s", logTail(p.Log(), failedLogLines))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return p
}
