package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/configwave/configwave/internal/testenv/testvolume"
)

// RuleFiles is the reloader as the Prometheus Operator runs it beside Prometheus
// (prometheus-config-reloader's flags, --watched-dir on the rule files' volume) under the
// operator's fixed 50 MiB memory limit, with 20 MiB of rule files swapped in whole, again and
// again. The floor is the same binary with the same flags on the same number of empty files.
type RuleFiles struct {
	Files       int     `json:"files"`
	MiB         float64 `json:"rule_files_mib"`
	Swaps       int     `json:"swaps"`
	LimitMiB    float64 `json:"memory_limit_mib"` // 0: no memory cgroup could be made; RSS only
	GoMemLimit  string  `json:"gomemlimit"`
	FloorPeak   float64 `json:"floor_peak_rss_mib"`
	Peak        float64 `json:"peak_rss_mib"`
	CgroupPeak  float64 `json:"cgroup_peak_mib"`
	OOMKills    int     `json:"oom_kills"`
	Survived    bool    `json:"survived"`
	ToldPerSwap float64 `json:"reload_requests_per_swap"`
}

// The Prometheus Operator's limit for its config-reloader sidecar, and the Go memory limit our
// binary sets itself from it in the container (startup.DefaultMemoryLimitRatio); outside a container
// namespace it would read the host's cgroup, so it is given here.
const (
	operatorLimit   = 50 << 20
	operatorGoLimit = "45MiB"
)

func reloaderRuleFiles(e *env, r *report) error {
	base := filepath.Join(e.cluster.Dir(), "bench-rules")
	rf := &RuleFiles{Files: 40, Swaps: e.reps(5, 20), GoMemLimit: operatorGoLimit}
	r.RuleFiles = rf
	const fileSize = 512 << 10
	rf.MiB = float64(rf.Files*fileSize) / (1 << 20)
	floor, err := ruleFilesRun(e, filepath.Join(base, "floor"), rf.Files, 16, rf.Swaps)
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	rf.FloorPeak = floor.peak
	full, err := ruleFilesRun(e, filepath.Join(base, "full"), rf.Files, fileSize, rf.Swaps)
	if err != nil {
		return err
	}
	rf.LimitMiB, rf.Peak, rf.CgroupPeak, rf.OOMKills, rf.Survived = full.limitMiB, full.peak, full.cgroupPeak, full.oomKills, full.survived
	rf.ToldPerSwap = float64(full.told) / float64(rf.Swaps)
	return nil
}

type ruleFilesResult struct {
	limitMiB, peak, cgroupPeak float64
	oomKills, told             int
	survived                   bool
}

// ruleFilesRun swaps files of size bytes into dir swaps times, each a new version of every file,
// and waits for each to be told.
func ruleFilesRun(e *env, dir string, files, size, swaps int) (ruleFilesResult, error) {
	var res ruleFilesResult
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	vol := testvolume.New(dir)
	if err := vol.Write(ruleSet(files, size, 0)); err != nil {
		return res, err
	}
	app, err := newToldApp(filepath.Join(dir, "rules-0.yaml"))
	if err != nil {
		return res, err
	}
	defer app.srv.Close()
	cg := newMemoryCgroup(fmt.Sprintf("configwave-bench-%d-%s", os.Getpid(), filepath.Base(dir)), operatorLimit)
	defer cg.remove()
	if cg != nil {
		res.limitMiB = float64(operatorLimit) / (1 << 20)
	}
	// As the operator renders the sidecar for rule files: --listen-address, --reload-url and
	// one --watched-dir per rule-file volume.
	addr, err := freeAddr()
	if err != nil {
		return res, err
	}
	p, err := startArgv(addr, nil, append(noAPI, "GOMEMLIMIT="+operatorGoLimit),
		cg.argv(e.reloader, "--listen-address="+addr, "--reload-url="+app.url, "--watched-dir="+dir))
	if err != nil {
		return res, err
	}
	defer p.stop()
	if err := p.waitReady(30 * time.Second); err != nil {
		return res, err
	}
	if _, _, err := app.waitNth(1, 30*time.Second); err != nil { // told once at start
		return res, err
	}
	for i := 1; i <= swaps; i++ {
		want := app.count() + 1
		if err := vol.Write(ruleSet(files, size, i)); err != nil {
			return res, err
		}
		if _, _, err := app.waitNth(want, 30*time.Second); err != nil {
			return res, fmt.Errorf("swap %d: %w", i, err)
		}
		select {
		case <-p.done:
			return res, fmt.Errorf("swap %d: the reloader exited (killed by the memory limit?)", i)
		default:
		}
	}
	time.Sleep(200 * time.Millisecond) // a late extra request shows in the count
	res.told = app.count() - 1
	res.peak = mib(peakRSSKiB(p.cmd.Process.Pid))
	res.cgroupPeak, res.oomKills = cg.peakMiB(), cg.oomKills()
	select {
	case <-p.done:
	default:
		res.survived = true
	}
	return res, nil
}

// ruleSet is version v of files rule files of about size bytes each.
func ruleSet(files, size, v int) map[string]string {
	set := make(map[string]string, files)
	for f := range files {
		var b strings.Builder
		// The version line makes every swap a change, even of the floor's tiny files.
		fmt.Fprintf(&b, "# version %d\ngroups:\n- name: bench-%d\n  rules:\n", v, f)
		for n := 0; b.Len() < size; n++ {
			fmt.Fprintf(&b, "  - record: job:bench_%d_%d:rate5m\n    expr: sum by (job) (rate(bench_total{file=\"%d\",version=\"%d\"}[5m]))\n", f, n, f, v)
		}
		set[fmt.Sprintf("rules-%d.yaml", f)] = b.String()
	}
	return set
}

// memoryCgroup is a cgroup (v2, else v1's memory controller) with a memory limit, for a
// process started in it; nil where none can be made (not root, no controller), and then every
// method does nothing and the figures are RSS alone.
type memoryCgroup struct {
	dir string
	v2  bool
}

func newMemoryCgroup(name string, limit int64) *memoryCgroup {
	for _, c := range []struct {
		root, limitFile string
		v2              bool
	}{{"/sys/fs/cgroup", "memory.max", true}, {"/sys/fs/cgroup/memory", "memory.limit_in_bytes", false}} {
		if c.v2 {
			if _, err := os.Stat(filepath.Join(c.root, "cgroup.controllers")); err != nil {
				continue
			}
		}
		dir := filepath.Join(c.root, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, c.limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
			_ = os.Remove(dir)
			continue
		}
		return &memoryCgroup{dir: dir, v2: c.v2}
	}
	return nil
}

// argv starts bin in the cgroup: a shell moves itself in, then execs bin.
func (c *memoryCgroup) argv(bin string, args ...string) []string {
	if c == nil {
		return append([]string{bin}, args...)
	}
	return append([]string{"/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, c.dir, bin}, args...)
}

func (c *memoryCgroup) peakMiB() float64 {
	if c == nil {
		return 0
	}
	f := map[bool]string{true: "memory.peak", false: "memory.max_usage_in_bytes"}[c.v2]
	b, err := os.ReadFile(filepath.Join(c.dir, f))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return float64(n) / (1 << 20)
}

func (c *memoryCgroup) oomKills() int {
	if c == nil {
		return 0
	}
	f := map[bool]string{true: "memory.events", false: "memory.oom_control"}[c.v2]
	b, _ := os.ReadFile(filepath.Join(c.dir, f))
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == "oom_kill" {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

func (c *memoryCgroup) remove() {
	if c == nil {
		return
	}
	for range 50 { // the killed process may take a moment to leave
		if err := os.Remove(c.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (f *RuleFiles) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### Rule files under the Prometheus Operator's memory limit\n\nThe reloader with prometheus-config-reloader's flags as the operator renders its sidecar (`--reload-url`, `--watched-dir`), `GOMEMLIMIT=%s` as the binary sets it from a 50 MiB container limit, watching %d rule files of %.0f MiB in all, swapped in whole %d times as kubelet's atomic writer swaps them, each swap told before the next. Floor: the same binary and flags on %d files of a few bytes.\n\n", f.GoMemLimit, f.Files, f.MiB, f.Swaps, f.Files)
	b.WriteString(row("", "peak RSS MiB", "peak / floor"))
	b.WriteString(row("---", "---", "---"))
	b.WriteString(row("floor: the same files, empty", f1(f.FloorPeak), "1.0×"))
	b.WriteString(row(fmt.Sprintf("%.0f MiB of rule files", f.MiB), f1(f.Peak), ratio(f.Peak, f.FloorPeak)))
	if f.LimitMiB > 0 {
		verdict := "it survived"
		if !f.Survived || f.OOMKills > 0 {
			verdict = fmt.Sprintf("**it was killed** (%d OOM kills)", f.OOMKills)
		}
		fmt.Fprintf(&b, "\nIn a memory cgroup limited to %.0f MiB, as the pod's container is: peak usage %.1f MiB (page cache of the files read included), %s; %.1f reload requests per swap.\n", f.LimitMiB, f.CgroupPeak, verdict, f.ToldPerSwap)
	} else {
		fmt.Fprintf(&b, "\nNo memory cgroup could be made in this run (not root, or no memory controller): RSS only; %.1f reload requests per swap.\n", f.ToldPerSwap)
	}
	return b.String()
}
