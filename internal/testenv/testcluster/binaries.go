package testcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Component versions. Changing one changes the cache key, so a new set is built beside the old.
const (
	KubernetesVersion = "v1.37.2"
	kwokModule        = "sigs.k8s.io/kwok"
	kwokVersion       = "v0.8.0"
)

// wrapperDir is the nested Go module (relative to the repository root) whose mains build
// etcd and the Kubernetes components from the module proxy.
const wrapperDir = "hack/controlplane/kube"

var components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"}

// Binaries locates a built control plane.
type Binaries struct {
	Dir        string // holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kwok
	KwokStages string // kwok stage configuration (node and pod "fast" stages)
}

func (b Binaries) path(name string) string { return filepath.Join(b.Dir, name) }

// EnsureBinaries returns the control-plane binaries, building them first if the cache does not
// hold this exact set. The cache lives outside the clone (CONFIGWAVE_CACHE, else the user cache
// folder) so every clone and every later run reuses one build; a file lock keeps parallel test
// packages from building the same set twice. Progress goes to out.
func EnsureBinaries(ctx context.Context, out io.Writer) (Binaries, error) {
	root, err := RepoRoot(ctx)
	if err != nil {
		return Binaries{}, err
	}
	key, err := cacheKey(filepath.Join(root, wrapperDir))
	if err != nil {
		return Binaries{}, err
	}
	base, err := cacheBase()
	if err != nil {
		return Binaries{}, err
	}
	dir := filepath.Join(base, "controlplane-"+KubernetesVersion+"-"+key)
	bins := Binaries{Dir: filepath.Join(dir, "bin"), KwokStages: filepath.Join(dir, "kwok-stages.yaml")}
	done := filepath.Join(dir, "complete")
	if _, err := os.Stat(done); err == nil {
		return bins, nil
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("create control-plane cache %s: %w (set CONFIGWAVE_CACHE to a writable folder)", dir, err)
	}
	unlock, err := lockFile(filepath.Join(dir, "lock"))
	if err != nil {
		return Binaries{}, err
	}
	defer unlock()
	if _, err := os.Stat(done); err == nil { // another process built it while we waited
		return bins, nil
	}

	fmt.Fprintf(out, "Building the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubelet %s, kwok %s)\n", KubernetesVersion, kwokVersion)
	fmt.Fprintf(out, "into %s.\nThe first build takes about 10 minutes on 2 cores and needs ~5 GB of disk; later runs reuse it.\n", dir)
	start := time.Now()
	if err := buildKubernetes(ctx, out, filepath.Join(root, wrapperDir), bins.Dir); err != nil {
		return Binaries{}, err
	}
	if err := buildKwok(ctx, out, dir, bins); err != nil {
		return Binaries{}, err
	}
	if err := os.WriteFile(done, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return Binaries{}, fmt.Errorf("mark control-plane cache complete: %w", err)
	}
	fmt.Fprintf(out, "Control plane built in %s.\n", time.Since(start).Round(time.Second))
	return bins, nil
}

func buildKubernetes(ctx context.Context, out io.Writer, src, binDir string) error {
	ldflags := []string{"-s", "-w"}
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		// Without these, discovery reports v0.0.0-master and version-gated clients misbehave.
		ldflags = append(ldflags,
			"-X", pkg+".gitVersion="+KubernetesVersion,
			"-X", pkg+".gitMajor=1",
			"-X", pkg+".gitMinor=37")
	}
	args := []string{"build", "-trimpath", "-ldflags", strings.Join(ldflags, " "), "-o", binDir + string(filepath.Separator)}
	for _, c := range components {
		args = append(args, "./"+c)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly")
	return runWithProgress(ctx, out, cmd, "go build etcd and Kubernetes components")
}

func buildKwok(ctx context.Context, out io.Writer, cacheDir string, bins Binaries) error {
	cmd := exec.CommandContext(ctx, "go", "install", "-trimpath", "-ldflags=-s -w", kwokModule+"/cmd/kwok@"+kwokVersion)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOBIN="+bins.Dir)
	if err := runWithProgress(ctx, out, cmd, "go install kwok"); err != nil {
		return err
	}
	// kwok will not start without stages; keep our own copy so a cleaned module cache
	// cannot break a cached build.
	modDir, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", kwokModule+"@"+kwokVersion).Output()
	if err != nil {
		return fmt.Errorf("locate kwok %s module: %w", kwokVersion, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(modDir, &mod); err != nil || mod.Dir == "" {
		return fmt.Errorf("locate kwok %s module: go mod download printed no folder (%v)", kwokVersion, err)
	}
	dir := mod.Dir
	var stages []string
	for _, sub := range []string{"kustomize/stage/node/fast", "kustomize/stage/pod/fast"} {
		files, err := filepath.Glob(filepath.Join(dir, sub, "*.yaml"))
		if err != nil || len(files) == 0 {
			return fmt.Errorf("kwok stages under %s: none found (%v)", sub, err)
		}
		sort.Strings(files)
		for _, f := range files {
			if filepath.Base(f) == "kustomization.yaml" {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return fmt.Errorf("read kwok stage: %w", err)
			}
			stages = append(stages, strings.TrimSpace(string(b)))
		}
	}
	return os.WriteFile(bins.KwokStages, []byte(strings.Join(stages, "\n---\n")+"\n"), 0o644)
}

// runWithProgress runs a long build and prints a line every 30 seconds so a person (or CI log)
// can see it is alive.
func runWithProgress(ctx context.Context, out io.Writer, cmd *exec.Cmd, what string) error {
	var stderr strings.Builder
	cmd.Stdout = out
	cmd.Stderr = io.MultiWriter(&stderr, out)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	fmt.Fprintf(out, "  %s ...\n", what)
	for {
		select {
		case err := <-errc:
			if err != nil {
				return fmt.Errorf("%s failed after %s: %w", what, time.Since(start).Round(time.Second), err)
			}
			fmt.Fprintf(out, "  %s: done in %s\n", what, time.Since(start).Round(time.Second))
			return nil
		case <-tick.C:
			fmt.Fprintf(out, "  %s: still building (%s)\n", what, time.Since(start).Round(time.Second))
		case <-ctx.Done():
			<-errc
			return fmt.Errorf("%s: %w", what, ctx.Err())
		}
	}
}

// cacheKey hashes what decides the build's output: the wrapper module's files, kwok's version,
// and the Go toolchain.
func cacheKey(src string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s@%s\n", runtime.Version(), kwokModule, kwokVersion)
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(rel), len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash control-plane sources in %s: %w", src, err)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

func cacheBase() (string, error) {
	if dir := os.Getenv("CONFIGWAVE_CACHE"); dir != "" {
		return dir, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find a cache folder for the control plane: %w (set CONFIGWAVE_CACHE)", err)
	}
	return filepath.Join(dir, "configwave"), nil
}

// RepoRoot finds the configwave checkout from the current directory, which is a package folder
// under go test and the repository root under make.
func RepoRoot(ctx context.Context) (string, error) {
	b, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(b))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the configwave module: run from the repository")
	}
	// A nested module (the benchmark harness) sits below the repository root: walk up.
	for root := filepath.Dir(gomod); ; root = filepath.Dir(root) {
		if _, err := os.Stat(filepath.Join(root, wrapperDir, "go.mod")); err == nil {
			return root, nil
		}
		if parent := filepath.Dir(root); parent == root {
			return "", fmt.Errorf("control-plane sources (%s) not found above %s", wrapperDir, filepath.Dir(gomod))
		}
	}
}

func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open build lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("take build lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
