// Command bench is `make bench`: it starts the local control plane, runs the reloader and wave
// binaries against it, measures latency, cost and memory against floors measured in the same
// run, and writes docs/benchmarks.md (between its generated markers), bench/results.json and
// one PNG plot per scaling series. A separate module, so that its plotting library stays out of
// the binaries' dependencies.
//
//	go run . -mode=quick   # under 3 minutes
//	go run . -mode=full
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// env is what every scenario gets.
type env struct {
	ctx      context.Context
	cluster  *testcluster.Cluster
	client   kubernetes.Interface
	reloader string // binary
	wave     string // binary
	self     string // this binary, which doubles as the subprocess-mode app
	full     bool
	log      io.Writer
	seq      int
}

func main() {
	if os.Getenv("CONFIGWAVE_BENCH_CHILD") != "" {
		childApp()
		return
	}
	if spec := os.Getenv("CONFIGWAVE_BENCH_WATCHER"); spec != "" {
		bareWatcher(spec)
		return
	}
	if spec := os.Getenv("CONFIGWAVE_BENCH_API_WATCHER"); spec != "" {
		bareAPIWatcher(spec)
		return
	}
	mode := flag.String("mode", "quick", "quick (under 3 minutes) or full")
	flag.StringVar(&only, "only", "", "run only the steps whose name starts with this (e.g. reloader); prints the figures as JSON and writes no report")
	flag.StringVar(&reloaderBin, "reloader-bin", "", "measure this reloader binary instead of building cmd/reloader (e.g. an older build, for a before/after)")
	flag.StringVar(&configmapReloadFrom, "configmap-reload", "", "configmap-reload to compare the folder mode with: a built binary or a checkout of its repository (default: built from its module through the module proxy)")
	flag.StringVar(&waveBin, "wave-bin", "", "measure this wave binary instead of building cmd/wave (for a before/after)")
	flag.StringVar(&waveCPUProfile, "wave-cpuprofile", "", "write a CPU profile of wave during the first change of the shared-ConfigMap fan-out to this file (read it with go tool pprof)")
	flag.BoolVar(&merge, "merge", false, "with -only: replace those steps' sections of the last report (bench/results.json, docs/benchmarks.md) and keep the rest")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *mode == "full"); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, full bool) error {
	start := time.Now()
	root, err := testcluster.RepoRoot(ctx)
	if err != nil {
		return err
	}
	if _, err := testcluster.EnsureBinaries(ctx, os.Stderr); err != nil {
		return err
	}
	e := &env{ctx: ctx, full: full, log: os.Stderr}
	var rm func()
	if reloaderBin != "" {
		e.reloader = reloaderBin
	} else {
		if e.reloader, rm, err = testcluster.BuildRelease(filepath.Join(root, "cmd", "reloader"), "reloader"); err != nil {
			return err
		}
		defer rm()
	}
	if waveBin != "" {
		e.wave = waveBin
	} else {
		if e.wave, rm, err = testcluster.BuildRelease(filepath.Join(root, "cmd", "wave"), "wave"); err != nil {
			return err
		}
		defer rm()
	}
	if e.self, err = os.Executable(); err != nil {
		return err
	}
	if e.cluster, err = testcluster.Start(ctx, testcluster.Options{Out: os.Stderr}); err != nil {
		return err
	}
	defer func() { e.cluster.Stop(); _ = e.cluster.Remove() }()
	if e.client, err = kubernetes.NewForConfig(e.cluster.Config()); err != nil {
		return err
	}

	rep := &report{Mode: map[bool]string{true: "full", false: "quick"}[full], Started: start}
	if merge {
		if only == "" || reloaderBin != "" || waveBin != "" {
			return errors.New("-merge replaces the sections of the steps named with -only, measured on this tree's binaries: give -only, and neither -reloader-bin nor -wave-bin")
		}
		if rep, err = lastReport(root); err != nil {
			return err
		}
	}
	for _, s := range steps(root) {
		if !strings.HasPrefix(s.name, only) {
			continue
		}
		t := time.Now()
		fmt.Fprintf(os.Stderr, "== %s\n", s.name)
		if err := s.f(e, rep); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Fprintf(os.Stderr, "   done in %s\n", time.Since(t).Round(time.Second))
	}
	if merge {
		peer := ""
		if configmapReloadFrom != "" {
			peer = " -configmap-reload=CHECKOUT" // a path of this machine: never written into the report
		}
		// A step run again replaces its earlier line, as its section replaces the earlier figures.
		rep.Rerun = slices.DeleteFunc(rep.Rerun, func(line string) bool { return strings.HasPrefix(line, fmt.Sprintf("%q on ", only)) })
		// The step's name is quoted within BENCH_ARGS: make hands it to the shell, which would
		// split a name of several words (-only would take the first, and -merge be ignored).
		rep.Rerun = append(rep.Rerun, fmt.Sprintf("%q on %s, `make bench BENCH_MODE=%s BENCH_ARGS=\"'-only=%s' -merge%s\"` (mode %s)",
			only, start.UTC().Format("2006-01-02 15:04 UTC"), map[bool]string{true: "full", false: "quick"}[full], only, peer, map[bool]string{true: "full", false: "quick"}[full]))
		return rep.write(root)
	}
	rep.Took = time.Since(start)
	if only != "" || reloaderBin != "" || waveBin != "" {
		out, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		fmt.Println(string(out))
		return nil
	}
	return rep.write(root)
}

// step is one part of make bench, run in this order.
type step struct {
	name string
	f    func(*env, *report) error
}

func steps(root string) []step {
	return []step{
		{"reloader propagation", reloaderPropagation},
		{"reloader burst", reloaderBurst},
		{"sidecar footprint", sidecarFootprint},
		{"reloader folders", reloaderFolders},
		{"reloader rule files", reloaderRuleFiles},
		{"reloader real pods", reloaderRealPods},
		{"reloader one first", reloaderOneFirst},
		{"wave trigger latency", waveLatency},
		{"wave in-flight cap", waveInFlightCap}, // before the shared step leaves kube-controller-manager busy
		{"wave runaway writer", waveRunaway},    // before the shared step leaves kube-controller-manager busy
		{"wave shared ConfigMap", waveShared},
		{"wave coalescing", waveCoalescing},
		{"wave memory", waveMemory},
		{"wave used and unused config", waveUsedMemory},
		{"wave scale", waveScale},
		{"wave revisions", waveRevisions},
		{"micro-benchmarks", func(e *env, r *report) error { return micro(e, r, root) }},
	}
}

// only, reloaderBin and waveBin are for before/after comparisons, which must not overwrite the
// report.
var only, reloaderBin, waveBin, configmapReloadFrom, waveCPUProfile string

// merge: with only, the steps run replace their sections of the last report.
var merge bool

// lastReport reads bench/results.json, for -merge.
func lastReport(root string) (*report, error) {
	b, err := os.ReadFile(filepath.Join(root, "bench", "results.json"))
	if err != nil {
		return nil, fmt.Errorf("-merge: %w (run make bench once first)", err)
	}
	var r report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("-merge: bench/results.json: %w", err)
	}
	return &r, nil
}

// namespace creates a fresh namespace for one scenario.
func (e *env) namespace(prefix string) (string, error) {
	e.seq++
	name := fmt.Sprintf("%s-%d", prefix, e.seq)
	return name, createNamespace(e.ctx, e.client, name)
}
