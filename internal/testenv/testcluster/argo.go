package testcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// The Argo Rollouts controller, built with the control plane (programsDir pins the version), for
// the tests of wave's Rollout kind.
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
// not hold it (EnsurePrograms). It is built from a copy of its module that listens on loopback
// only (patchedModules).
func EnsureArgoRollouts(ctx context.Context, out io.Writer) (ArgoRollouts, error) {
	p, err := EnsurePrograms(ctx, out, "rollouts-controller")
	if err != nil {
		return ArgoRollouts{}, err
	}
	crds, err := filepath.Glob(filepath.Join(p.argoCRDs, "*-crd.yaml"))
	if err != nil || len(crds) == 0 {
		marker := filepath.Join(filepath.Dir(p.Dir), "built", "rollouts-controller")
		return ArgoRollouts{}, fmt.Errorf("no Argo Rollouts %s CRDs in %s: remove %s to build the controller and copy them again", ArgoRolloutsVersion, p.argoCRDs, marker)
	}
	sort.Strings(crds)
	return ArgoRollouts{Bin: p.Path("rollouts-controller"), CRDs: crds}, nil
}

// copyArgoRolloutsCRDs copies the CRDs of the Argo Rollouts that is built out of its patched
// copy in argo, which goes after the build, into the cache beside the controller.
func copyArgoRolloutsCRDs(argo, dest string) error {
	crds, err := filepath.Glob(filepath.Join(argo, "manifests", "crds", "*-crd.yaml"))
	if err != nil || len(crds) == 0 {
		return fmt.Errorf("no CRDs under manifests/crds of Argo Rollouts %s: check where this version keeps them (testcluster's copyArgoRolloutsCRDs)", ArgoRolloutsVersion)
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return fmt.Errorf("create %s for the Argo Rollouts CRDs: %w", dest, err)
	}
	for _, f := range crds {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read the Argo Rollouts CRD %s: %w", filepath.Base(f), err)
		}
		if err := os.WriteFile(filepath.Join(dest, filepath.Base(f)), b, 0o644); err != nil {
			return fmt.Errorf("copy the Argo Rollouts CRD %s: %w", filepath.Base(f), err)
		}
	}
	return nil
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

// InstallArgoRolloutsCRDs serves Rollouts without their controller (a test that writes their
// status itself), as StartArgoRollouts does, until the test ends.
func InstallArgoRolloutsCRDs(t testing.TB, c *Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute) // a build, when the cache lacks it
	defer cancel()
	argo, err := EnsureArgoRollouts(ctx, testWriter{t})
	if err != nil {
		t.Fatalf("Argo Rollouts' CRDs: %v", err)
	}
	InstallCRDs(t, c, argo.CRDs)
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
			// A CRD deleted a moment after it was made can fail its finalizer with "storage is
			// (re)initializing", retried after a backoff that may outlast the minute: a write to
			// the CRD queues it again at once.
			polls := 0
			if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				_, err := crds.Get(ctx, name, metav1.GetOptions{})
				if polls++; polls%25 == 0 && err == nil {
					nudge := fmt.Sprintf(`{"metadata":{"annotations":{"configwave.test/nudge":"%d"}}}`, polls)
					_, _ = crds.Patch(ctx, name, types.MergePatchType, []byte(nudge), metav1.PatchOptions{})
				}
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
