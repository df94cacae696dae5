package testcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// The Prometheus Operator's CustomResourceDefinitions for what the chart renders
// (ServiceMonitor, PodMonitor, PrometheusRule), read from the operator's Go module, so that the
// chart's monitoring objects are checked against the operator's own schema; and the operator
// itself (StartPrometheusOperator), whose reloader containers the image must run.
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

// The operator itself, built from its Go module like the Argo Rollouts controller, for the tests
// that take the reloader containers it renders and run them from our image. Its module has
// replace directives and its zip lacks the replaced folders, so it is built as a dependency of
// a small wrapper module, where replace directives do not apply.

// PrometheusOperatorBin returns the operator's binary, building it first if the cache does not
// hold it.
func PrometheusOperatorBin(ctx context.Context, out io.Writer) (string, error) {
	base, err := cacheBase()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, "prometheus-operator-"+PrometheusOperatorVersion)
	bin := filepath.Join(dir, "bin", "operator")
	done := filepath.Join(dir, "complete")
	if _, err := os.Stat(done); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create the Prometheus Operator cache %s: %w (set CONFIGWAVE_CACHE to a writable folder)", dir, err)
	}
	unlock, err := lockFile(filepath.Join(dir, "lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(done); err == nil {
		return bin, nil
	}
	fmt.Fprintf(out, "Building the Prometheus Operator %s into %s (a few minutes on 2 cores, once).\n", PrometheusOperatorVersion, dir)
	src := filepath.Join(dir, "src")
	_ = os.RemoveAll(src)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module configwave.test/promoperator\n\ngo 1.24.0\n"), 0o644); err != nil {
		return "", err
	}
	env := append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=auto", "GOFLAGS=-mod=mod")
	pkg := prometheusOperatorModule + "/cmd/operator"
	get := exec.CommandContext(ctx, "go", "get", pkg+"@"+PrometheusOperatorVersion)
	get.Dir, get.Env = src, env
	if err := runWithProgress(ctx, out, get, "go get the Prometheus Operator"); err != nil {
		return "", err
	}
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w -X github.com/prometheus/common/version.Version="+strings.TrimPrefix(PrometheusOperatorVersion, "v"), "-o", bin, pkg)
	build.Dir, build.Env = src, env
	if err := runWithProgress(ctx, out, build, "go build the Prometheus Operator"); err != nil {
		return "", err
	}
	if err := os.WriteFile(done, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("mark the Prometheus Operator cache complete: %w", err)
	}
	return bin, nil
}

// AllPrometheusOperatorCRDs are every CRD the operator waits for at start.
func AllPrometheusOperatorCRDs(ctx context.Context) ([]string, error) {
	dir, err := downloadModule(ctx, append(os.Environ(), "GOFLAGS=-mod=readonly"), prometheusOperatorModule, PrometheusOperatorVersion)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_*.yaml"))
	if err != nil || len(files) < 10 {
		return nil, fmt.Errorf("the CRDs in %s@%s: found %d (%v)", prometheusOperatorModule, PrometheusOperatorVersion, len(files), err)
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
