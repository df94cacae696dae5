package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/configwave/configwave/internal/build/gobuild"
	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testvolume"
)

// Folders is the reloader on a mounted folder (configmap-reload's arguments), beside
// configmap-reload itself, built from its module, each on a folder of its own, in the same run.
type Folders struct {
	Swaps int `json:"swaps"`
	// Event: a bare fsnotify watcher on its folder sees kubelet's ..data created. Floor: that
	// watcher, a process of its own as a sidecar is, sends the reload request at once on the
	// connection it keeps, with nothing else.
	Event           Stats  `json:"fsnotify_event"`
	Floor           Stats  `json:"floor_fsnotify_and_request"`
	Reloader        Stats  `json:"reloader_request"`
	ConfigmapReload Stats  `json:"configmap_reload_request"`
	Peer            string `json:"configmap_reload_version"` // "" when it could not be built
	// Burst: BurstSwaps swaps spread over BurstSpread ms.
	BurstSwaps       int     `json:"burst_swaps"`
	BurstSpread      float64 `json:"burst_spread_ms"`
	BurstReloads     int     `json:"burst_reloads"`
	BurstFinal       float64 `json:"burst_final_told_after_last_swap_ms"`
	BurstPeerReloads int     `json:"burst_configmap_reload_reloads"`
	// Idle: fresh processes, after IdleWindow seconds.
	IdleWindow   float64 `json:"idle_window_s"`
	RSSMiB       float64 `json:"idle_rss_mib"`
	AnonMiB      float64 `json:"idle_anon_mib"`
	PeerRSSMiB   float64 `json:"configmap_reload_idle_rss_mib"`
	PeerAnonMiB  float64 `json:"configmap_reload_idle_anon_mib"`
	PeerBinMiB   float64 `json:"configmap_reload_binary_mib"`
	ReloaderBinM float64 `json:"reloader_binary_mib"`
	// The reloader's file-only build (no API client), where the image's configmap-reload and
	// prometheus-config-reloader paths lead, idle beside the others.
	FileOnlyRSSMiB  float64 `json:"fileonly_idle_rss_mib"`
	FileOnlyAnonMiB float64 `json:"fileonly_idle_anon_mib"`
	FileOnlyBinMiB  float64 `json:"fileonly_binary_mib"`
}

// configmapReloadVersion is the release measured against: the one the Prometheus community
// chart shipped last.
const configmapReloadVersion = "v0.15.0"

// noAPI is a reloader environment with no way to reach an API server: file mode needs none.
var noAPI = []string{"KUBECONFIG=/does/not/exist", "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT="}

// bareWatcher is the floor's process (this binary, CONFIGWAVE_BENCH_WATCHER=DIR URL): on each
// ..data created in DIR it prints the time and POSTs URL, on the connection it keeps between
// requests, as configmap-reload and the reloader keep theirs.
func bareWatcher(spec string) {
	dir, url, _ := strings.Cut(spec, " ")
	w, err := fsnotify.NewWatcher()
	if err == nil {
		err = w.Add(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bare watcher:", err)
		os.Exit(1)
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, IdleConnTimeout: 30 * time.Second}}
	fmt.Println("start")
	for ev := range w.Events {
		if ev.Has(fsnotify.Create) && filepath.Base(ev.Name) == "..data" {
			fmt.Printf("event %d\n", time.Now().UnixNano())
			if resp, err := client.Post(url, "", nil); err == nil {
				resp.Body.Close()
			}
		}
	}
}

// toldApp is a reload endpoint that records, for each request, when it came and what the app
// would read from the folder at that moment.
type toldApp struct {
	url  string
	srv  *http.Server
	mu   sync.Mutex
	at   []time.Time
	seen []string
}

func newToldApp(file string) (*toldApp, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &toldApp{url: "http://" + ln.Addr().String() + "/-/reload"}
	a.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		b, _ := os.ReadFile(file)
		a.mu.Lock()
		a.at, a.seen = append(a.at, now), append(a.seen, string(b))
		a.mu.Unlock()
	})}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

func (a *toldApp) count() int { a.mu.Lock(); defer a.mu.Unlock(); return len(a.at) }

// waitNth returns when request n (1-based) came and what the app read then.
func (a *toldApp) waitNth(n int, timeout time.Duration) (time.Time, string, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		a.mu.Lock()
		if len(a.at) >= n {
			at, seen := a.at[n-1], a.seen[n-1]
			a.mu.Unlock()
			return at, seen, nil
		}
		a.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	return time.Time{}, "", fmt.Errorf("no reload request %d within %s", n, timeout)
}

// buildConfigmapReload builds configmap-reload as its Dockerfile does (static, -s -w): from
// -configmap-reload (a built binary, or a checkout of its repository), else from its module
// through the module proxy. Without either the comparison is left out and the report says so.
func buildConfigmapReload(dir string) (bin, version string, err error) {
	bin = filepath.Join(dir, "configmap-reload")
	var cmd *exec.Cmd
	switch st, serr := os.Stat(configmapReloadFrom); {
	case configmapReloadFrom == "":
		cmd = exec.Command("go", "install", "-trimpath", "-ldflags=-s -w", "github.com/jimmidyson/configmap-reload@"+configmapReloadVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+dir)
		version = configmapReloadVersion
	case serr != nil:
		return "", "", fmt.Errorf("-configmap-reload: %w", serr)
	case !st.IsDir():
		return configmapReloadFrom, "(a given binary)", nil
	default:
		cmd = exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
		cmd.Dir = configmapReloadFrom
		version = "(built from a checkout)"
		if out, err := exec.Command("git", "-C", configmapReloadFrom, "describe", "--tags").Output(); err == nil {
			version = strings.TrimSpace(string(out))
		}
	}
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("build configmap-reload: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return bin, version, nil
}

// startConfigmapReload runs configmap-reload on dir, telling url; its metrics tell it is up.
func startConfigmapReload(bin, dir, url string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p := &proc{addr: addr, done: make(chan struct{})}
	p.cmd = exec.Command(bin, "--volume-dir="+dir, "--webhook-url="+url, "--web.listen-address="+addr)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, _ := p.get("/metrics"); code == 200 {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, errors.New("configmap-reload did not serve its metrics within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reloaderFolders measures the reloader on a mounted folder against a bare fsnotify watcher
// and against configmap-reload, each on its own copy of the same swaps.
func reloaderFolders(e *env, r *report) error {
	base := filepath.Join(e.cluster.Dir(), "bench-folders")
	ours, theirs := filepath.Join(base, "reloader"), filepath.Join(base, "configmap-reload")
	for _, d := range []string{ours, theirs, filepath.Join(base, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	f := &Folders{}
	r.Folders = f
	peerBin, version, err := buildConfigmapReload(filepath.Join(base, "bin"))
	if err != nil {
		fmt.Fprintln(e.log, "   configmap-reload left out:", err)
	} else {
		f.Peer = version
	}
	if err := folderLatency(e, f, ours, theirs, peerBin); err != nil {
		return err
	}
	if err := folderBurst(e, f, ours, theirs, peerBin); err != nil {
		return err
	}
	return folderIdle(e, f, base, peerBin)
}

// folderSet is one folder written as kubelet writes it, a bare watcher on it and one reloader
// (ours or configmap-reload) telling an app.
type folderSet struct {
	vol  *testvolume.Volume
	app  *toldApp
	proc *proc
}

func startFolderSet(e *env, reloader, dir, peerBin string, peer bool) (*folderSet, error) {
	s := &folderSet{vol: testvolume.New(dir)}
	if err := s.vol.Write(map[string]string{"n": "0"}); err != nil {
		return nil, err
	}
	app, err := newToldApp(filepath.Join(dir, "n"))
	if err != nil {
		return nil, err
	}
	s.app = app
	if peer {
		s.proc, err = startConfigmapReload(peerBin, dir, app.url)
	} else if s.proc, err = startEnv(reloader, nil, noAPI, "--volume-dir="+dir, "--webhook-url="+app.url); err == nil {
		err = s.proc.waitReady(30 * time.Second)
	}
	if err != nil {
		app.srv.Close()
		return nil, err
	}
	return s, nil
}

func (s *folderSet) stop() {
	s.proc.stop()
	s.app.srv.Close()
}

// startFolderSets starts the reloader on ours and, when it could be built, configmap-reload on
// theirs; stop stops both.
func startFolderSets(e *env, ours, theirs, peerBin string) (sets []*folderSet, stop func(), err error) {
	stop = func() {
		for _, s := range sets {
			s.stop()
		}
	}
	for i, dir := range []string{ours, theirs} {
		if i == 1 && peerBin == "" {
			break
		}
		s, err := startFolderSet(e, e.reloader, dir, peerBin, i == 1)
		if err != nil {
			stop()
			return nil, nil, err
		}
		sets = append(sets, s)
	}
	return sets, stop, nil
}

// folderLatency gives the reloader, configmap-reload and the floor (a bare watcher) a folder and
// an app each, and swaps the folders in turn, one at a time: each swap waits until its app was
// told before the next folder's is written. On a 2-core machine, a tool that reacts while
// another does competes with it for a core, and whichever is woken second loses time that is not
// its own; when the swaps were written side by side, configmap-reload (written first) answered
// before the bare watcher. The order stays the same every round, so that each folder's swaps
// are always more than the reloader's debounce apart.
func folderLatency(e *env, f *Folders, ours, theirs, peerBin string) error {
	sets, stop, err := startFolderSets(e, ours, theirs, peerBin)
	if err != nil {
		return err
	}
	defer stop()
	floorDir := filepath.Join(filepath.Dir(ours), "floor")
	floorVol := testvolume.New(floorDir)
	if err := os.MkdirAll(floorDir, 0o755); err != nil {
		return err
	}
	if err := floorVol.Write(map[string]string{"n": "0"}); err != nil {
		return err
	}
	floorApp, err := newToldApp(filepath.Join(floorDir, "n"))
	if err != nil {
		return err
	}
	defer floorApp.srv.Close()
	created, stopWatcher, err := startChild(e, "CONFIGWAVE_BENCH_WATCHER="+floorDir+" "+floorApp.url, "the bare watcher")
	if err != nil {
		return err
	}
	defer stopWatcher()
	var event, floor, mine, peer []time.Duration
	type contender struct {
		name string
		vol  *testvolume.Volume
		app  *toldApp
		took *[]time.Duration
	}
	cs := []contender{{"the reloader", sets[0].vol, sets[0].app, &mine}, {"the bare watcher", floorVol, floorApp, &floor}}
	if len(sets) > 1 {
		cs = append(cs, contender{"configmap-reload", sets[1].vol, sets[1].app, &peer})
	}
	// The reloader's first pass, at its start, was just now: a swap within its --debounce (100 ms)
	// of a pass is part of a burst, merged and told 100 ms later, which is not what an isolated
	// swap measures.
	time.Sleep(200 * time.Millisecond)
	n := e.reps(30, 100)
	for i := 1; i <= n; i++ {
		want := strconv.Itoa(i)
		for _, c := range cs {
			t0 := time.Now()
			if err := c.vol.Write(map[string]string{"n": want}); err != nil {
				return err
			}
			at, seen, err := c.app.waitNth(i, 30*time.Second)
			if err != nil {
				return fmt.Errorf("swap %d, %s: %w", i, c.name, err)
			}
			if seen != want {
				return fmt.Errorf("swap %d, %s: the app read %q when told, want %q", i, c.name, seen, want)
			}
			*c.took = append(*c.took, at.Sub(t0))
			if c.vol == floorVol {
				select {
				case at := <-created:
					event = append(event, at.Sub(t0))
				case <-time.After(30 * time.Second):
					return fmt.Errorf("swap %d: the bare watcher saw no ..data", i)
				}
			}
			time.Sleep(60 * time.Millisecond) // the next swap starts on a quiet machine
		}
	}
	f.Swaps, f.Event, f.Floor, f.Reloader, f.ConfigmapReload = n, stats(event), stats(floor), stats(mine), stats(peer)
	return nil
}

// folderBurst: 100 swaps, 10 ms apart, with default settings.
func folderBurst(e *env, f *Folders, ours, theirs, peerBin string) error {
	sets, stop, err := startFolderSets(e, ours, theirs, peerBin)
	if err != nil {
		return err
	}
	defer stop()
	const swaps = 100
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	began := time.Now()
	for i := 1; i <= swaps; i++ {
		<-tick.C
		for _, s := range sets {
			if err := s.vol.Write(map[string]string{"n": strconv.Itoa(i)}); err != nil {
				return err
			}
		}
	}
	last := time.Now()
	final := strconv.Itoa(swaps)
	var finalAt time.Time
	err = waitFor(e.ctx, 30*time.Second, func() bool {
		a := sets[0].app
		a.mu.Lock()
		defer a.mu.Unlock()
		for k, seen := range a.seen {
			if seen == final {
				finalAt = a.at[k]
				return true
			}
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("the app was never told of the last swap: %w", err)
	}
	time.Sleep(2 * time.Second) // any request still due
	f.BurstSwaps, f.BurstSpread, f.BurstReloads, f.BurstFinal = swaps, ms(last.Sub(began)), sets[0].app.count(), ms(finalAt.Sub(last))
	if len(sets) > 1 {
		f.BurstPeerReloads = sets[1].app.count()
	}
	return nil
}

// folderIdle: fresh processes on a folder, untouched for the window: the reloader, its
// file-only build and configmap-reload, side by side.
func folderIdle(e *env, f *Folders, base, peerBin string) error {
	dir := filepath.Join(base, "idle")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fileOnly, err := buildFileOnly(e, filepath.Join(base, "bin"))
	if err != nil {
		return err
	}
	mine, err := startFolderSet(e, e.reloader, dir, "", false)
	if err != nil {
		return err
	}
	defer mine.stop()
	small, err := startFolderSet(e, fileOnly, dir, "", false)
	if err != nil {
		return err
	}
	defer small.stop()
	var theirs *folderSet
	if peerBin != "" {
		if theirs, err = startFolderSet(e, "", dir, peerBin, true); err != nil {
			return err
		}
		defer theirs.stop()
	}
	window := time.Duration(e.reps(10, 60)) * time.Second
	time.Sleep(window)
	f.IdleWindow = window.Seconds()
	f.RSSMiB, f.AnonMiB = idleMiB(mine.proc.cmd.Process.Pid)
	f.ReloaderBinM = fileMiB(e.reloader)
	f.FileOnlyRSSMiB, f.FileOnlyAnonMiB = idleMiB(small.proc.cmd.Process.Pid)
	f.FileOnlyBinMiB = fileMiB(fileOnly)
	if theirs != nil {
		f.PeerRSSMiB, f.PeerAnonMiB = idleMiB(theirs.proc.cmd.Process.Pid)
		f.PeerBinMiB = fileMiB(peerBin)
	}
	return nil
}

// buildFileOnly builds the reloader's file-only build into dir, as the image's is built.
func buildFileOnly(e *env, dir string) (string, error) {
	root, err := testcluster.RepoRoot(e.ctx)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, gobuild.FileOnlyReloader)
	return bin, gobuild.Binary(e.ctx, gobuild.Target{Root: root, OS: runtime.GOOS, Arch: runtime.GOARCH, Version: "bench"}, gobuild.FileOnlyReloader, bin)
}

// idleMiB is a process's RSS, and the anonymous part of it, in MiB.
func idleMiB(pid int) (rss, anon float64) {
	return mib(rssKiB(pid)), mib(statusKiB(pid, "RssAnon"))
}

func mib(kib int) float64 { return float64(kib) / 1024 }

func fileMiB(path string) float64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return float64(st.Size()) / (1 << 20)
}

func (f *Folders) markdown() string {
	var b strings.Builder
	peer := "configmap-reload " + f.Peer + ", built as its Dockerfile builds it"
	if f.Peer == "" {
		peer = "configmap-reload (not measured in this run: it could not be built)"
	}
	fmt.Fprintf(&b, "\n### Mounted folders (`--volume-dir`, %d isolated swaps)\n\nEach swap is written as kubelet's atomic writer writes it (`..data` swap); from the start of the swap to each event. The reloader, the floor and the peer each have a folder and an app of their own, swapped in turn, one at a time: the next folder is swapped 60 ms after the app of the last was told, so no two of them react at once (on 2 cores they would compete for a core). Floor: a bare fsnotify watcher, a process of its own as a sidecar is, that sends the reload request on the connection it keeps between requests (as configmap-reload and the reloader keep theirs) as soon as it sees `..data` created: no read, no comparison, nothing else. Beside it: %s. Target: at most 1.2× the floor.\n\n", f.Swaps, peer)
	b.WriteString(row("event", "median ms", "p90 ms", "max ms", "median / floor"))
	b.WriteString(row("---", "---", "---", "---", "---"))
	b.WriteString(row("fsnotify sees `..data`", f2(f.Event.Median), f2(f.Event.P90), f2(f.Event.Max), ratio(f.Event.Median, f.Floor.Median)))
	b.WriteString(row("floor: the bare watcher's reload request at the app", f2(f.Floor.Median), f2(f.Floor.P90), f2(f.Floor.Max), "1.0×"))
	b.WriteString(row("reloader: reload request at the app", f2(f.Reloader.Median), f2(f.Reloader.P90), f2(f.Reloader.Max), ratio(f.Reloader.Median, f.Floor.Median)))
	if f.Peer != "" {
		b.WriteString(row("configmap-reload: reload request at the app", f2(f.ConfigmapReload.Median), f2(f.ConfigmapReload.P90), f2(f.ConfigmapReload.Max), ratio(f.ConfigmapReload.Median, f.Floor.Median)))
	}
	fmt.Fprintf(&b, "\n%d swaps over %.0f ms, default settings: the reloader sent **%d reload requests**, the last %.1f ms after the last swap, and the app read the last content then", f.BurstSwaps, f.BurstSpread, f.BurstReloads, f.BurstFinal)
	if f.Peer != "" {
		fmt.Fprintf(&b, "; configmap-reload sent %d", f.BurstPeerReloads)
	}
	fmt.Fprintf(&b, ".\n\nIdle for %.0f s after start, watching one folder: reloader RSS **%.1f MiB** (%.1f MiB of it anonymous; binary %.1f MiB)", f.IdleWindow, f.RSSMiB, f.AnonMiB, f.ReloaderBinM)
	if f.FileOnlyRSSMiB > 0 {
		fmt.Fprintf(&b, ", its file-only build (`/reloader-fileonly`, where the image's configmap-reload and prometheus-config-reloader paths lead) RSS **%.1f MiB** (%.1f MiB anonymous; binary %.1f MiB)", f.FileOnlyRSSMiB, f.FileOnlyAnonMiB, f.FileOnlyBinMiB)
	}
	if f.Peer != "" {
		fmt.Fprintf(&b, ", configmap-reload RSS **%.1f MiB** (%.1f MiB anonymous; binary %.1f MiB)", f.PeerRSSMiB, f.PeerAnonMiB, f.PeerBinMiB)
	}
	b.WriteString(". The rest of each RSS is the binary's own pages, which every container started from the same image on a node shares; the reloader's builds give back those that start-up touched (internal/process/binarypages), configmap-reload keeps them.\n")
	return b.String()
}
