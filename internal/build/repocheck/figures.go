package repocheck

// The measured figures the README quotes, rendered from bench/results.json, the file `make
// bench` writes, so that the landing page never says more or less than the last run measured.
// `make bench` rewrites the README's block; a test fails when it differs.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Begin and End enclose the generated block in a Markdown file.
const (
	Begin = "<!-- figures:begin (generated from bench/results.json by make bench and make docs; edits here are overwritten) -->"
	End   = "<!-- figures:end -->"
)

// Stats is one measured distribution, in milliseconds.
type Stats struct {
	N      int     `json:"n"`
	Median float64 `json:"median_ms"`
	P90    float64 `json:"p90_ms"`
	Max    float64 `json:"max_ms"`
}

// Results is the part of bench/results.json the README quotes. Every section is optional: a
// quick run measures fewer than a full one.
type Results struct {
	Mode    string    `json:"mode"`
	Started time.Time `json:"started"`
	Machine string    `json:"machine"`
	Command string    `json:"command"`

	Propagation *Propagation     `json:"reloader_propagation"`
	Burst       *Burst           `json:"reloader_burst"`
	Footprint   *Footprint       `json:"sidecar_footprint"`
	Folders     *Folders         `json:"reloader_folders"`
	RealPods    *RealPods        `json:"reloader_real_pods"`
	OneFirst    *OneFirst        `json:"reloader_one_first"`
	WaveLatency []WaveLatencyRun `json:"wave_latency"`
	Shared      *Shared          `json:"wave_shared_configmap"`
	Coalescing  *Coalescing      `json:"wave_coalescing"`
	Runaway     *Runaway         `json:"wave_runaway"`
	Memory      []MemoryRun      `json:"wave_memory"`
	Scale       []ScaleRun       `json:"wave_scale"`
}

// The sections of results.json the README quotes, with the fields it quotes; bench/report.go
// writes them.

type OneFirst struct {
	SoakS float64       `json:"soak_s"`
	Rows  []OneFirstRow `json:"rows"`
}

type OneFirstRow struct {
	Rollout   string  `json:"rollout"`
	Pods      int     `json:"pods"`
	UntilLast Stats   `json:"until_last_ms"`
	Requests  float64 `json:"api_requests_per_pod_per_change"`
}

type Propagation struct {
	Floor       Stats `json:"floor_watch"`
	HTTP        Stats `json:"reload_request"`
	DefaultHTTP Stats `json:"reload_request_default_debounce"`
}

type Burst struct {
	Updates     int     `json:"updates"`
	Spread      float64 `json:"spread_ms"`
	Reloads     int     `json:"reloads"`
	FinalOnDisk float64 `json:"final_on_disk_after_last_update_ms"`
}

type Footprint struct {
	RSSMiB float64 `json:"rss_mib"`
}

type Folders struct {
	Floor                Stats   `json:"floor_fsnotify_and_request"`
	Reloader             Stats   `json:"reloader_request"`
	ConfigmapReload      Stats   `json:"configmap_reload_request"`
	BurstSwaps           int     `json:"burst_swaps"`
	BurstSpread          float64 `json:"burst_spread_ms"`
	BurstReloads         int     `json:"burst_reloads"`
	BurstFinal           float64 `json:"burst_final_told_after_last_swap_ms"`
	BurstConfigmapReload int     `json:"burst_configmap_reload_reloads"`
	IdleRSS              float64 `json:"idle_rss_mib"`
	ConfigmapReloadRSS   float64 `json:"configmap_reload_idle_rss_mib"`
	FileOnlyRSS          float64 `json:"fileonly_idle_rss_mib"`
}

type RealPods struct {
	LeftOut              string `json:"left_out"`
	Kubelet              Stats  `json:"kubelet_file_update"`
	Reloader             Stats  `json:"reloader_served"`
	ReloaderShare        Stats  `json:"reloader_served_after_file"`
	ConfigmapReloadKub   Stats  `json:"configmap_reload_kubelet_file_update"`
	ConfigmapReload      Stats  `json:"configmap_reload_served"`
	ConfigmapReloadShare Stats  `json:"configmap_reload_served_after_file"`
	API                  Stats  `json:"api_mode_served"`
	DefaultChanges       int    `json:"default_sync_changes"`
	DefaultReloader      Stats  `json:"default_sync_reloader_served"`
	DefaultAPI           Stats  `json:"default_sync_api_mode_served"`
}

type WaveLatencyRun struct {
	Deployments       int     `json:"deployments"`
	Latency           Stats   `json:"latency"`
	Floor             Stats   `json:"floor_watch_plus_patch"`
	RequestsPerChange float64 `json:"api_requests_per_change"`
}

type Shared struct {
	Deployments int     `json:"deployments"`
	QPS         int     `json:"kube_api_qps"`
	UntilLast   Stats   `json:"until_last_patched"`
	Floor       Stats   `json:"floor_bare_patch_loop"`
	RatioMin    float64 `json:"ratio_min"`
	RatioMax    float64 `json:"ratio_max"`
}

type Coalescing struct {
	Pairs         int     `json:"pairs"`
	Gap           Stats   `json:"gap"`
	Default       float64 `json:"default_ms"`
	Rollouts      int     `json:"rollouts"`
	RolloutsFloor int     `json:"rollouts_floor"`
	Latency       Stats   `json:"latency"`
	Floor         Stats   `json:"latency_floor"`
}

type Runaway struct {
	Writes   int     `json:"writes"`
	Seconds  float64 `json:"seconds"`
	Floor    float64 `json:"floor_s"`
	Rollouts int     `json:"rollouts"`
	Bound    int     `json:"bound"`
}

type MemoryRun struct {
	ConfigMaps int     `json:"configmaps"`
	Secrets    int     `json:"secrets"`
	ConfigMiB  float64 `json:"config_mib"`
	RSSMiB     float64 `json:"rss_mib"`
}

type ScaleRun struct {
	Objects   int     `json:"objects"`
	Workloads int     `json:"workloads"`
	ReadyS    float64 `json:"ready_s"`
	RSSMiB    float64 `json:"rss_mib"`
	PeakMiB   float64 `json:"peak_rss_mib"`
}

// LoadFigures reads a results file.
func LoadFigures(path string) (Results, error) {
	var r Results
	b, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("read the benchmark results: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

func ms(v float64) string  { return fmt.Sprintf("%.1f ms", v) }
func mib(v float64) string { return fmt.Sprintf("%.1f MiB", v) }
func times(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// FiguresMarkdown is the README's block: one row per figure, each beside the floor or the peer it was
// measured against in the same run.
// spread is the range of a ratio over one run's changes, where the run measured it.
func spread(lo, hi float64) string {
	if hi == 0 {
		return ""
	}
	return fmt.Sprintf(" (each change: %.2f–%.2f×)", lo, hi)
}

func FiguresMarkdown(r Results) string {
	var b strings.Builder
	row := func(what, measured, against string) {
		if against == "" {
			against = "-"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", what, measured, against)
	}
	fmt.Fprintf(&b, "\nLast `%s`, %s, on %s ([docs/benchmarks.md](docs/benchmarks.md) has every figure and how each is measured):\n\n",
		r.Command, r.Started.UTC().Format("2006-01-02"), r.Machine)
	b.WriteString("| what | measured (median) | against, in the same run |\n| --- | --- | --- |\n")
	if p := r.Propagation; p != nil {
		row("reloader: ConfigMap patch → reload request at the app, new files in place, default settings",
			ms(p.DefaultHTTP.Median), fmt.Sprintf("a bare watch in a process of its own, %s: %s", ms(p.Floor.Median), times(p.DefaultHTTP.Median, p.Floor.Median)))
		row("the same with `--debounce=0`", ms(p.HTTP.Median), times(p.HTTP.Median, p.Floor.Median)+" the bare watch")
	}
	if u := r.Burst; u != nil {
		row(fmt.Sprintf("reloader: %d updates in %.0f ms", u.Updates, u.Spread),
			fmt.Sprintf("%d reloads, the final content on disk %s after the last update", u.Reloads, ms(u.FinalOnDisk)), "")
	}
	if f := r.Footprint; f != nil {
		row("reloader: idle sidecar watching one ConfigMap", mib(f.RSSMiB)+" RSS", "")
	}
	if f := r.Folders; f != nil {
		row("reloader `--volume-dir`: kubelet `..data` swap → reload request at the app", ms(f.Reloader.Median),
			fmt.Sprintf("a bare fsnotify watcher sending the same request, %s: %s; configmap-reload %s", ms(f.Floor.Median), times(f.Reloader.Median, f.Floor.Median), ms(f.ConfigmapReload.Median)))
		row(fmt.Sprintf("reloader `--volume-dir`: %d swaps in %.0f ms", f.BurstSwaps, f.BurstSpread),
			fmt.Sprintf("%d requests, the last with the final content, %s after the last swap", f.BurstReloads, ms(f.BurstFinal)), fmt.Sprintf("configmap-reload: %d requests", f.BurstConfigmapReload))
		row("reloader `--volume-dir`: idle", mib(f.IdleRSS)+" RSS", "configmap-reload "+mib(f.ConfigmapReloadRSS))
		if f.FileOnlyRSS > 0 {
			row("reloader's file-only build (`/reloader-fileonly`, where the peers' paths lead): idle", mib(f.FileOnlyRSS)+" RSS", "configmap-reload "+mib(f.ConfigmapReloadRSS))
		}
	}
	if p := r.RealPods; p != nil && p.LeftOut == "" {
		peer := ""
		if p.ConfigmapReload.N > 0 {
			peer = fmt.Sprintf("; configmap-reload %s, %s after kubelet's file (%s) in its pod", ms(p.ConfigmapReload.Median), ms(p.ConfigmapReloadShare.Median), ms(p.ConfigmapReloadKub.Median))
		}
		row("real pod, kubelet's sync period 1 s: ConfigMap patch → Prometheus serves it, our sidecar on the mounted folder",
			fmt.Sprintf("%s, %s after kubelet's file", ms(p.Reloader.Median), ms(p.ReloaderShare.Median)),
			fmt.Sprintf("kubelet's update of the file in that pod, %s%s", ms(p.Kubelet.Median), peer))
		row("real pod: the same through the API (`--configmap`)", ms(p.API.Median), "")
		if p.DefaultChanges > 0 {
			row("real pod, kubelet's default sync period (1 minute): the same, sidecar on the mounted folder",
				fmt.Sprintf("%.1f s", p.DefaultReloader.Median/1000), fmt.Sprintf("through the API: %s", ms(p.DefaultAPI.Median)))
		}
	}
	if o := r.OneFirst; o != nil {
		oneFirstRows(o, row)
	}
	if n := len(r.WaveLatency); n > 0 {
		w := r.WaveLatency[n-1] // the largest scale measured
		row(fmt.Sprintf("wave: ConfigMap patch → template changed, %d opted-in Deployments", w.Deployments), ms(w.Latency.Median),
			fmt.Sprintf("the watch event plus one PATCH, %s: %s; %.2f API requests per change", ms(w.Floor.Median), times(w.Latency.Median, w.Floor.Median), w.RequestsPerChange))
	}
	if s := r.Shared; s != nil {
		row(fmt.Sprintf("wave: one ConfigMap shared by %d Deployments, patch → the last one rolled (`--kube-api-qps=%d`)", s.Deployments, s.QPS),
			fmt.Sprintf("%.1f s", s.UntilLast.Median/1000), fmt.Sprintf("a bare loop of the same PATCHes at the same QPS, %.1f s: %s%s", s.Floor.Median/1000, times(s.UntilLast.Median, s.Floor.Median), spread(s.RatioMin, s.RatioMax)))
	}
	if c := r.Coalescing; c != nil {
		row("wave: gap between one client's ConfigMap and Secret writes", ms(c.Gap.Median)+fmt.Sprintf(" (max %s)", ms(c.Gap.Max)),
			fmt.Sprintf("`--coalesce=%.0fms`: %s the largest gap", c.Default, times(c.Default, c.Gap.Max)))
		row(fmt.Sprintf("wave: %d such pairs", c.Pairs), fmt.Sprintf("%d rollouts, patch → template changed %s", c.Rollouts, ms(c.Latency.Median)),
			fmt.Sprintf("`--coalesce=0`: %d rollouts, %s", c.RolloutsFloor, ms(c.Floor.Median)))
	}
	if u := r.Runaway; u != nil {
		row(fmt.Sprintf("wave: a runaway writer, %d writes in %.0f s, `--min-rollout-interval=%.0fs`", u.Writes, u.Seconds, u.Floor),
			fmt.Sprintf("%d rollouts", u.Rollouts), fmt.Sprintf("at most %d: one per floor", u.Bound))
	}
	if n := len(r.Memory); n > 1 {
		lo, hi := r.Memory[0], r.Memory[n-1]
		row(fmt.Sprintf("wave: RSS with %d ConfigMaps and %d Secrets (%.0f MiB of config) in the cluster", hi.ConfigMaps, hi.Secrets, hi.ConfigMiB),
			mib(hi.RSSMiB), fmt.Sprintf("with %d ConfigMaps and %d Secrets: %s", lo.ConfigMaps, lo.Secrets, mib(lo.RSSMiB)))
	}
	if n := len(r.Scale); n > 0 {
		s := r.Scale[n-1]
		row(fmt.Sprintf("wave: start with %d objects and %d opted-in workloads", s.Objects, s.Workloads),
			fmt.Sprintf("ready in %.1f s, RSS %s (peak %s)", s.ReadyS, mib(s.RSSMiB), mib(s.PeakMiB)), "")
	}
	b.WriteString("\n")
	return b.String()
}

// RewriteFigures puts block between the markers of doc.
func RewriteFigures(doc []byte, block string) ([]byte, error) {
	s := string(doc)
	i, j := strings.Index(s, Begin), strings.Index(s, End)
	if i < 0 || j < i {
		return nil, errors.New("the document lacks the figures markers " + Begin + " ... " + End)
	}
	return []byte(s[:i+len(Begin)] + "\n" + block + s[j:]), nil
}

// CurrentFigures returns the block now between the markers of doc.
func CurrentFigures(doc []byte) (string, error) {
	s := string(doc)
	i, j := strings.Index(s, Begin), strings.Index(s, End)
	if i < 0 || j < i {
		return "", errors.New("the document lacks the figures markers")
	}
	return s[i+len(Begin)+1 : j], nil
}

// oneFirstRows quotes the largest workload measured: each one-first row beside all-at-once.
func oneFirstRows(o *OneFirst, row func(what, measured, against string)) {
	pods := 0
	for _, r := range o.Rows {
		pods = max(pods, r.Pods)
	}
	var all *OneFirstRow
	for i, r := range o.Rows {
		if r.Pods == pods && r.Rollout == "all-at-once" {
			all = &o.Rows[i]
		}
	}
	for _, r := range o.Rows {
		if r.Pods != pods || all == nil || r.Rollout == all.Rollout {
			continue
		}
		mode, rest, _ := strings.Cut(r.Rollout, ", ")
		row(fmt.Sprintf("reloader `--rollout=%s`, %s, soak %g s: ConfigMap patch → the last of %d pods told", mode, rest, o.SoakS, pods),
			fmt.Sprintf("%.1f s, %.1f API requests per pod", r.UntilLast.Median/1000, r.Requests),
			fmt.Sprintf("all-at-once (the peers' way), %s, where a config that breaks the app reaches every pod", ms(all.UntilLast.Median)))
	}
}
