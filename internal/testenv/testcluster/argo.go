package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	goversion "go/version"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// The Argo Rollouts controller, built from its Go module like the control plane, for the tests
// of wave's Rollout kind.
const (
	argoRolloutsModule  = "github.com/argoproj/argo-rollouts"
	ArgoRolloutsVersion = "v1.10.2"
)

// ArgoRollouts locates a built Argo Rollouts controller and its CustomResourceDefinitions.
type ArgoRollouts struct {
	Bin  string
	CRDs []string // YAML files
}

// EnsureArgoRollouts returns the Argo Rollouts controller, building it first if the cache does
// not hold it. Its module has replace directives, so it is built as the main module (go install
// @version would refuse it), with the toolchain its go.mod asks for. Its servers listen on every
// interface, fixed in its source, so it is built from a copy with that one line changed to the
// loopback address: the tests use loopback only. The copy is removed after the build.
func EnsureArgoRollouts(ctx context.Context, out io.Writer) (ArgoRollouts, error) {
	base, err := cacheBase()
	if err != nil {
		return ArgoRollouts{}, err
	}
	dir := filepath.Join(base, "argo-rollouts-"+ArgoRolloutsVersion)
	a := ArgoRollouts{Bin: filepath.Join(dir, "bin", "rollouts-controller")}
	done := filepath.Join(dir, "complete")
	listCRDs := func() error {
		a.CRDs, err = filepath.Glob(filepath.Join(dir, "crds", "*-crd.yaml"))
		sort.Strings(a.CRDs)
		return err
	}
	if _, err := os.Stat(done); err == nil {
		return a, listCRDs()
	}
	if err := os.MkdirAll(filepath.Join(dir, "crds"), 0o755); err != nil {
		return ArgoRollouts{}, fmt.Errorf("create the Argo Rollouts cache %s: %w (set CONFIGWAVE_CACHE to a writable folder)", dir, err)
	}
	unlock, err := lockFile(filepath.Join(dir, "lock"))
	if err != nil {
		return ArgoRollouts{}, err
	}
	defer unlock()
	if _, err := os.Stat(done); err == nil {
		return a, listCRDs()
	}

	fmt.Fprintf(out, "Building the Argo Rollouts controller %s into %s (once).\n", ArgoRolloutsVersion, dir)
	// GOTOOLCHAIN=auto: its go.mod may ask for a newer Go than the machine's, which the module
	// proxy serves.
	env := append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=auto", "GOFLAGS=-mod=readonly")
	modDir, err := downloadModule(ctx, env, argoRolloutsModule, ArgoRolloutsVersion)
	if err != nil {
		return ArgoRollouts{}, err
	}
	src := filepath.Join(dir, "src")
	_ = os.RemoveAll(src)
	if err := os.CopyFS(src, os.DirFS(modDir)); err != nil {
		return ArgoRollouts{}, fmt.Errorf("copy the Argo Rollouts sources: %w", err)
	}
	defer os.RemoveAll(src)
	if err := listenOnLoopback(src); err != nil {
		return ArgoRollouts{}, err
	}
	if env, err = buildWithLocalGo(ctx, src, env); err != nil {
		return ArgoRollouts{}, err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", a.Bin, "./cmd/rollouts-controller")
	cmd.Dir, cmd.Env = src, env
	if err := runWithProgress(ctx, out, cmd, "go build rollouts-controller"); err != nil {
		return ArgoRollouts{}, err
	}
	crds, err := filepath.Glob(filepath.Join(modDir, "manifests", "crds", "*-crd.yaml"))
	if err != nil || len(crds) == 0 {
		return ArgoRollouts{}, fmt.Errorf("no Argo Rollouts CRDs under %s/manifests/crds (%v)", modDir, err)
	}
	for _, f := range crds {
		b, err := os.ReadFile(f)
		if err != nil {
			return ArgoRollouts{}, err
		}
		if err := os.WriteFile(filepath.Join(dir, "crds", filepath.Base(f)), b, 0o644); err != nil {
			return ArgoRollouts{}, err
		}
	}
	if err := os.WriteFile(done, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return ArgoRollouts{}, fmt.Errorf("mark the Argo Rollouts cache complete: %w", err)
	}
	return a, listCRDs()
}

// downloadModule brings module@version into the module cache (from the module proxy, once)
// and returns its folder.
func downloadModule(ctx context.Context, env []string, module, version string) (string, error) {
	download := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	download.Env = env
	b, err := download.Output()
	if err != nil {
		return "", fmt.Errorf("download %s@%s: %w", module, version, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(b, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("locate %s@%s: go mod download printed no folder (%v)", module, version, err)
	}
	return mod.Dir, nil
}

// buildWithLocalGo lets the copy at src build with the machine's Go where its go.mod asks for a
// later patch release of the same Go: the language is the same, and the machine's toolchain
// shares the standard library and every common package with the other builds, where the one
// GOTOOLCHAIN=auto fetches would compile them all again. A later language version is left to
// GOTOOLCHAIN=auto.
func buildWithLocalGo(ctx context.Context, src string, env []string) ([]string, error) {
	local, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOVERSION: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("read the Argo Rollouts go.mod: %w", err)
	}
	want := ""
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			want = "go" + strings.TrimSpace(v)
		}
	}
	have := strings.TrimSpace(string(local))
	if !goversion.IsValid(want) || goversion.Lang(want) != goversion.Lang(have) || goversion.Compare(want, have) <= 0 {
		return env, nil
	}
	edit := exec.CommandContext(ctx, "go", "mod", "edit", "-go="+strings.TrimPrefix(have, "go"), "-toolchain=none")
	edit.Dir, edit.Env = src, append(env, "GOTOOLCHAIN=local")
	if out, err := edit.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("let Argo Rollouts build with %s: %w: %s", have, err, out)
	}
	return append(env, "GOTOOLCHAIN=local"), nil
}

// listenOnLoopback changes the controller's listen address in the copy at src to loopback. It
// fails if the line is not found exactly once, so that a new version cannot quietly listen on
// every interface.
func listenOnLoopback(src string) error {
	const file, from, to = "controller/controller.go", `"0.0.0.0:%d"`, `"127.0.0.1:%d"`
	path := filepath.Join(src, file)
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the Argo Rollouts controller's listen address: %w", err)
	}
	if n := strings.Count(string(b), from); n != 1 {
		return fmt.Errorf("%s has %s %d times, not once: check how Argo Rollouts %s listens before building it for loopback-only tests", file, from, n, ArgoRolloutsVersion)
	}
	_ = os.Chmod(path, 0o644) // copied read-only from the module cache
	return os.WriteFile(path, []byte(strings.Replace(string(b), from, to, 1)), 0o644)
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// StartArgoRollouts installs Argo Rollouts' CustomResourceDefinitions and runs its controller
// beside kube-controller-manager. When the test ends, the controller stops and the
// definitions (and so every Rollout) are deleted, so that later tests find no Rollouts served.
func StartArgoRollouts(t testing.TB, c *Cluster) *Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	argo, err := EnsureArgoRollouts(ctx, testWriter{t})
	if err != nil {
		t.Fatalf("Argo Rollouts controller: %v", err)
	}
	InstallCRDs(t, c, argo.CRDs)
	healthz, metrics := freePort(t), freePort(t)
	p := StartProcess(t, argo.Bin, nil, "--kubeconfig="+c.Kubeconfig(), "--leader-elect=false",
		fmt.Sprintf("--healthzPort=%d", healthz), fmt.Sprintf("--metricsPort=%d", metrics), "--loglevel=info")
	p.Addr = fmt.Sprintf("127.0.0.1:%d", healthz)
	deadline := time.Now().Add(time.Minute)
	for code, _ := p.Get("/healthz"); code != 200; code, _ = p.Get("/healthz") {
		if p.Exited() || time.Now().After(deadline) {
			t.Fatalf("the Argo Rollouts controller did not become healthy:\n%s", logTail(p.Log(), failedLogLines))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return p
}

func freePort(t testing.TB) int {
	t.Helper()
	var port int
	if _, err := fmt.Sscanf(FreeAddr(t), "127.0.0.1:%d", &port); err != nil {
		t.Fatal(err)
	}
	return port
}

// InstallCRDs creates the CustomResourceDefinitions in files and waits until they are
// established. When the test ends they are deleted (and so every object of theirs), so that
// later tests find those kinds not served.
func InstallCRDs(t testing.TB, c *Cluster, files []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(crdResource)
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			t.Fatalf("read %s: %v", f, err)
		}
		if _, err := crds.Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create CRD %s: %v", u.GetName(), err)
		}
		names = append(names, u.GetName())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, name := range names {
			_ = crds.Delete(ctx, name, metav1.DeleteOptions{})
		}
		for _, name := range names {
			if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				_, err := crds.Get(ctx, name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			}); err != nil {
				t.Errorf("CRD %s still there a minute after its deletion", name)
			}
		}
	})
	for _, name := range names {
		if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			u, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, cond := range conds {
				if m, ok := cond.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			t.Fatalf("CRD %s not established: %v", name, err)
		}
	}
}
