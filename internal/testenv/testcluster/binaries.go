package testcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

// KubernetesVersion is the Kubernetes the programs module builds (its go.mod pins the same).
const KubernetesVersion = "v1.37.2"

// programsDir is the nested Go module (relative to the repository root) that builds the programs
// the tests run from one module graph: etcd, the Kubernetes components, kwok, Helm, the
// Prometheus Operator and the Argo Rollouts controller. One graph means one version of
// client-go, apimachinery, grpc and the rest, compiled once for them all by one go build; each
// compiled copies of its own before.
const programsDir = "hack/testprograms"

// programs are the programs the tests run, each the package that builds it in the programs
// module. The binary is named after the package's last element.
var programs = map[string]string{
	"etcd":                    "./etcd",
	"kube-apiserver":          "./kube-apiserver",
	"kube-controller-manager": "./kube-controller-manager",
	"kube-scheduler":          "./kube-scheduler",
	"kubelet":                 "./kubelet",
	"kwok":                    kwokModule + "/cmd/kwok",
	"helm":                    "helm.sh/helm/v4/cmd/helm",
	"operator":                prometheusOperatorModule + "/cmd/operator",
	"rollouts-controller":     argoRolloutsModule + "/cmd/rollouts-controller",
}

const kwokModule = "sigs.k8s.io/kwok"

// ControlPlanePrograms are what Start runs.
var ControlPlanePrograms = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kwok"}

// Binaries locates a built control plane.
type Binaries struct {
	Dir        string // holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kwok
	KwokStages string // kwok stage configuration (node and pod "fast" stages)
}

func (b Binaries) path(name string) string { return filepath.Join(b.Dir, name) }

// EnsureBinaries returns the control-plane binaries, building them first if the cache does not
// hold them (EnsurePrograms).
func EnsureBinaries(ctx context.Context, out io.Writer) (Binaries, error) {
	p, err := EnsurePrograms(ctx, out, ControlPlanePrograms...)
	if err != nil {
		return Binaries{}, err
	}
	return Binaries{Dir: p.Dir, KwokStages: p.kwokStages}, nil
}

// Programs locates programs built from the programs module.
type Programs struct {
	Dir        string // one binary per program, named as in programs
	kwokStages string
	argoCRDs   string // folder of the Argo Rollouts CRDs, copied from its module at build time
}

// Path is the binary of one program.
func (p Programs) Path(name string) string { return filepath.Join(p.Dir, name) }

// EnsurePrograms returns the programs named, building those the cache does not hold yet with
// one go build, so that the packages they share compile once. The cache lives outside the clone
// (CONFIGWAVE_CACHE, else the user cache folder) so every clone and every later run reuses one
// build; its folder is named from a hash of the programs module, the edits made to patched
// modules and the toolchain, so a new set is built beside the old. A file lock keeps parallel
// test packages from building at once (two go commands would compile the same packages twice).
// Progress goes to out.
func EnsurePrograms(ctx context.Context, out io.Writer, names ...string) (Programs, error) {
	root, err := RepoRoot(ctx)
	if err != nil {
		return Programs{}, err
	}
	src := filepath.Join(root, programsDir)
	key, err := cacheKey(src)
	if err != nil {
		return Programs{}, err
	}
	base, err := cacheBase()
	if err != nil {
		return Programs{}, err
	}
	dir := filepath.Join(base, "programs-"+key)
	p := Programs{Dir: filepath.Join(dir, "bin"), kwokStages: filepath.Join(dir, "kwok-stages.yaml"), argoCRDs: filepath.Join(dir, "argo-rollouts-crds")}
	built := filepath.Join(dir, "built")
	missing := func() []string {
		var m []string
		for _, name := range names {
			if _, err := os.Stat(filepath.Join(built, name)); err != nil {
				m = append(m, name)
			}
		}
		return m
	}
	if len(missing()) == 0 {
		return p, nil
	}
	if err := os.MkdirAll(built, 0o755); err != nil {
		return Programs{}, fmt.Errorf("create the programs cache %s: %w (set CONFIGWAVE_CACHE to a writable folder)", dir, err)
	}
	unlock, err := lockFile(filepath.Join(dir, "lock"))
	if err != nil {
		return Programs{}, err
	}
	defer unlock()
	todo := missing() // another process may have built some while we waited
	if len(todo) == 0 {
		return p, nil
	}
	for _, name := range todo {
		if _, ok := programs[name]; !ok {
			return Programs{}, fmt.Errorf("no program %q in %s: the programs are %s", name, programsDir, strings.Join(slices.Sorted(maps.Keys(programs)), ", "))
		}
	}
	fmt.Fprintf(out, "Building %s from %s into %s.\nThe first build of them all is the longest step of a cold make test and needs ~5 GB of disk; later runs reuse it.\n",
		strings.Join(todo, ", "), programsDir, dir)
	start := time.Now()
	if err := buildPrograms(ctx, out, src, filepath.Join(dir, "src"), p, todo); err != nil {
		return Programs{}, err
	}
	if slices.Contains(todo, "kwok") {
		if err := writeKwokStages(ctx, src, p.kwokStages); err != nil {
			return Programs{}, err
		}
	}
	for _, name := range todo {
		if err := os.WriteFile(filepath.Join(built, name), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
			return Programs{}, fmt.Errorf("mark %s built: %w", name, err)
		}
	}
	fmt.Fprintf(out, "Built %s in %s.\n", strings.Join(todo, ", "), time.Since(start).Round(time.Second))
	return p, nil
}

// buildPrograms builds names with one go build, which uses both cores: two at once would
// compile shared packages twice. Its go.mod is the programs module's with the patched modules
// in place (writeBuildModule), written into work and removed after.
func buildPrograms(ctx context.Context, out io.Writer, src, work string, p Programs, names []string) error {
	defer os.RemoveAll(work)
	modfile, err := writeBuildModule(ctx, src, work)
	if err != nil {
		return err
	}
	if slices.Contains(names, "rollouts-controller") {
		if err := copyArgoRolloutsCRDs(patchedCopy(work, argoRolloutsModule), p.argoCRDs); err != nil {
			return err
		}
	}
	ldflags, err := versionFlags(ctx, src, names)
	if err != nil {
		return err
	}
	args := []string{"build", "-modfile=" + modfile, "-trimpath", "-ldflags", strings.Join(append([]string{"-s", "-w"}, ldflags...), " "), "-o", p.Dir + string(filepath.Separator)}
	for _, name := range names {
		args = append(args, programs[name])
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly", "GOTOOLCHAIN=local", "GOWORK=off")
	if err := runWithProgress(ctx, out, cmd, "go build "+strings.Join(names, " ")); err != nil {
		return fmt.Errorf("%w (after a version in %s/go.mod is changed, run go run ./hack/devcluster --tidy-programs)", err, programsDir)
	}
	return nil
}

// versionFlags stamp the versions the programs report, which are v0.0.0 or master without them.
func versionFlags(ctx context.Context, src string, names []string) ([]string, error) {
	var flags []string
	if slices.Contains(names, "operator") {
		operator, err := pinnedModule(ctx, src, prometheusOperatorModule)
		if err != nil {
			return nil, err
		}
		flags = append(flags, "-X", "github.com/prometheus/common/version.Version="+strings.TrimPrefix(operator.Version, "v"))
	}
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		// Without these, discovery reports v0.0.0-master and version-gated clients misbehave.
		flags = append(flags,
			"-X", pkg+".gitVersion="+KubernetesVersion,
			"-X", pkg+".gitMajor=1",
			"-X", pkg+".gitMinor=37")
	}
	return flags, nil
}

// module is a module of the programs module's build list, in the module cache.
type module struct{ Path, Version, Dir string }

// writeKwokStages keeps our own copy of kwok's "fast" node and pod stages, which kwok will not
// start without, so that a cleaned module cache cannot break a cached build.
func writeKwokStages(ctx context.Context, src, dest string) error {
	kwok, err := pinnedModule(ctx, src, kwokModule)
	if err != nil {
		return err
	}
	var stages []string
	for _, sub := range []string{"kustomize/stage/node/fast", "kustomize/stage/pod/fast"} {
		files, err := filepath.Glob(filepath.Join(kwok.Dir, sub, "*.yaml"))
		if err != nil || len(files) == 0 {
			return fmt.Errorf("kwok %s stages under %s: none found (%v)", kwok.Version, sub, err)
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
	return os.WriteFile(dest, []byte(strings.Join(stages, "\n---\n")+"\n"), 0o644)
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

// cacheKey hashes what decides the build's output: the programs module's files (its go.mod
// and go.sum pin every version), the edits made to patched modules and the Go toolchain.
func cacheKey(src string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%#v\n", runtime.Version(), patchedModules)
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
		if _, err := os.Stat(filepath.Join(root, programsDir, "go.mod")); err == nil {
			return root, nil
		}
		if parent := filepath.Dir(root); parent == root {
			return "", fmt.Errorf("the programs module (%s) not found above %s", programsDir, filepath.Dir(gomod))
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
