package reload

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/reloader/source"
	"github.com/configwave/configwave/internal/reloader/unpack"
	"github.com/configwave/configwave/internal/testenv/testvolume"
)

func folder(name, version string, kv ...string) source.Object {
	o := source.Object{Ref: configref.Ref{Kind: source.Folder, Name: name}, Data: map[string][]byte{}, Version: version}
	for i := 0; i+1 < len(kv); i += 2 {
		o.Data[kv[i]] = []byte(kv[i+1])
	}
	return o
}

func TestEarlyTellCovers(t *testing.T) {
	told := &earlyTell{versions: map[string]string{"/a": "..2026_1", "/b": "..2026_7"}}
	for _, tc := range []struct {
		name  string
		early *earlyTell
		read  []source.Object
		want  bool
	}{
		{"every folder read through the target it had when the app was told", told,
			[]source.Object{folder("/a", "..2026_1"), folder("/b", "..2026_7")}, true},
		{"a folder swapped again before the read", told,
			[]source.Object{folder("/a", "..2026_2"), folder("/b", "..2026_7")}, false},
		{"a plain folder: its files may have changed since, unseen", told,
			[]source.Object{folder("/a", "..2026_1"), folder("/c", "")}, false},
		{"a folder the request did not know", told,
			[]source.Object{folder("/a", "..2026_1"), folder("/c", "..2026_1")}, false},
		{"no request on a swap", nil, []source.Object{folder("/a", "..2026_1")}, false},
		{"nothing read", told, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.early.covers(tc.read))
		})
	}
}

func TestTellsOnSwap(t *testing.T) {
	check := func(context.Context, string) error { return nil }
	for _, tc := range []struct {
		name   string
		writer Target
		check  func(context.Context, string) error
		want   bool
	}{
		{"folders the app reads where they are", &InPlace{}, nil, true},
		{"a check must pass before the app may read the set", &InPlace{}, check, false},
		{"a rendered file is written only by the pass", &Rendered{}, nil, false},
		{"API objects unpacked under the config root", unpack.New(t.TempDir()), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tellsOnSwap(tc.writer, tc.check))
		})
	}
}

func TestMayTellEarly(t *testing.T) {
	live := state{unpacked: true}
	for _, tc := range []struct {
		name  string
		s     state
		since time.Duration
		want  bool
	}{
		{"quiet since the last pass", live, time.Second, true},
		{"quiet for exactly the debounce", live, 100 * time.Millisecond, true},
		{"a burst under way: merged into the pass after it", live, 99 * time.Millisecond, false},
		{"before the first set is live", state{}, time.Second, false},
		{"a folder is missing: the pass decides", state{unpacked: true, waitingFor: "Folder /b"}, time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, mayTellEarly(tc.s, tc.since, 100*time.Millisecond))
		})
	}
}

// swapSourceFake is a fakeSource that reports swaps, as source.Folders does: the swap first,
// the read after.
type swapSourceFake struct {
	*fakeSource
	swaps chan source.Swap
}

func (f swapSourceFake) Swaps() <-chan source.Swap { return f.swaps }

// newSwapReloader runs a reloader on a swapSourceFake, on a loopClock, quiet after its first pass.
func newSwapReloader(t *testing.T, debounce time.Duration, objs ...source.Object) (*Reloader, swapSourceFake, *countingNotifier, *loopClock) {
	src := swapSourceFake{fakeSource: newFakeSource(objs...), swaps: make(chan source.Swap, 1)}
	n := &countingNotifier{}
	r := &Reloader{
		Source:        src,
		Writer:        &InPlace{Dir: "/a"},
		Layout:        Mounted{},
		Notifier:      n,
		Debounce:      debounce,
		RetryInterval: 300 * time.Millisecond,
		Metrics:       NewMetrics(prometheus.NewRegistry()),
	}
	clk := newLoopClock(r)
	start(t, r)
	require.Eventually(t, r.Ready, wait, tick)
	clk.stepAfterPass(t, func(s Status) bool { return s.Ready }, 2*r.Debounce)
	return r, src, n, clk
}

// swap reports a swap of /a to version, waits until the app was told (or not) of it, then
// publishes the read: objs.
func (f swapSourceFake) swap(t *testing.T, n *countingNotifier, version string, wantCalls int32, objs ...source.Object) {
	t.Helper()
	f.swaps <- source.Swap{Versions: map[string]string{"/a": version}}
	require.Eventually(t, func() bool { return n.calls.Load() == wantCalls }, wait, tick)
	f.set(source.Snapshot{Objects: objs})
}

func TestReloaderTellsTheAppOfASwapBeforeItIsRead(t *testing.T) {
	r, src, n, clk := newSwapReloader(t, 50*time.Millisecond, folder("/a", "..v1", "app.yml", "v1"))

	src.swap(t, n, "..v2", 1, folder("/a", "..v2", "app.yml", "v2"))
	require.Eventually(t, func() bool { return r.CurrentStatus().LastResult == ResultSuccess }, wait, tick)
	time.Sleep(100 * time.Millisecond)
	assert.EqualValues(t, 1, n.calls.Load(), "the pass after the read confirms the request sent on the swap")
	assert.EqualValues(t, 1, testutil.ToFloat64(r.Metrics.Reloads.WithLabelValues(ResultSuccess)))
	count, _ := histogram(t, r.Metrics.ReloadLatency)
	assert.EqualValues(t, 1, count, "one change told, one latency")

	v2 := r.CurrentStatus().LiveHash
	clk.stepAfterPass(t, func(s Status) bool { return s.LiveHash == v2 }, 2*r.Debounce)
	src.swap(t, n, "..v3", 2, folder("/a", "..v4", "app.yml", "v4"))
	require.Eventually(t, func() bool { return n.calls.Load() == 3 }, wait, tick,
		"the read found a later swap than the one told: the app is told again")

	clk.stepAfterPass(t, func(s Status) bool { return s.LiveHash != v2 }, 2*r.Debounce)
	src.swap(t, n, "..v5", 4, folder("/a", "..v5", "app.yml", "v4"))
	time.Sleep(200 * time.Millisecond)
	assert.EqualValues(t, 4, n.calls.Load(), "a swap to the same files is told once, as configmap-reload tells it, and not again")
}

func TestReloaderMergesSwapsOfABurst(t *testing.T) {
	r, src, n, clk := newSwapReloader(t, 500*time.Millisecond, folder("/a", "..v1", "app.yml", "v1"))

	src.swap(t, n, "..v2", 1, folder("/a", "..v2", "app.yml", "v2"))
	require.Eventually(t, func() bool { return r.CurrentStatus().LastResult == ResultSuccess }, wait, tick)
	// Within the debounce of that pass (the clock does not move until stepped): a burst. The swap
	// waits for the read and the pass.
	src.swaps <- source.Swap{Versions: map[string]string{"/a": "..v3"}}
	time.Sleep(10 * time.Millisecond)
	assert.EqualValues(t, 1, n.calls.Load(), "a swap of a burst is not told before it is read")
	src.set(source.Snapshot{Objects: []source.Object{folder("/a", "..v3", "app.yml", "v3")}})
	clk.stepOutOfBurst(t, r)
	require.Eventually(t, func() bool { return n.calls.Load() == 2 }, wait, tick, "the pass after the burst tells the app")
	time.Sleep(200 * time.Millisecond)
	assert.EqualValues(t, 2, n.calls.Load())
}

func TestReloaderReportsAFailedRequestOnASwapOnceAndRetries(t *testing.T) {
	r, src, n, clk := newSwapReloader(t, 50*time.Millisecond, folder("/a", "..v1", "app.yml", "v1"))
	n.fail.Store(true)

	src.swap(t, n, "..v2", 1, folder("/a", "..v2", "app.yml", "v2"))
	// The retry waits for the clock, which moves only when stepped: the failure stays in view,
	// and no retry runs before the app answers again.
	require.Eventually(t, func() bool { return r.CurrentStatus().LastResult == ResultNotifyFailed }, wait, tick)
	assert.EqualValues(t, 1, n.calls.Load(), "the pass takes the failed request as its own: no second round at once")
	assert.True(t, r.CurrentStatus().NotifyDue)
	n.fail.Store(false)
	require.Eventually(t, clk.HasWaiters, wait, tick, "a retry is set")
	clk.Step(r.RetryInterval)
	require.Eventually(t, func() bool { return !r.CurrentStatus().NotifyDue }, wait, tick, "retried after the retry interval")
	assert.EqualValues(t, 2, n.calls.Load())
}

// gatedNotifier counts requests; while hold is set a request waits for gate, as a slow app's
// answer does.
type gatedNotifier struct {
	calls atomic.Int32
	hold  atomic.Bool
	gate  chan struct{}
}

func (n *gatedNotifier) Notify(ctx context.Context) error {
	n.calls.Add(1)
	if n.hold.Load() {
		select {
		case <-n.gate:
		case <-ctx.Done():
		}
	}
	return nil
}

// passCounter is an Observer that counts passes.
type passCounter struct{ n atomic.Int32 }

func (p *passCounter) Pass(PassReport) { p.n.Add(1) }

// While the request on one swap waits for the app's answer, the source publishes that swap's
// read and reports the next swap: both wait in wait() together. The read is older than the swap
// and no pass took it yet, so the pass goes first: it confirms the request sent, and the next
// swap is told once its own read is in. Taking the swap first told the app of it, then of the
// older read (a request for a stale set, not covered by the newer one), then of the newer read:
// four requests for two swaps. Go's select picks at random, so several rounds are run.
func TestReloaderTellsNoStaleSetWhenAReadAndASwapWaitTogether(t *testing.T) {
	src := swapSourceFake{fakeSource: newFakeSource(folder("/a", "..v0", "app.yml", "v0")), swaps: make(chan source.Swap, 1)}
	n := &gatedNotifier{gate: make(chan struct{})}
	passes := &passCounter{}
	r := &Reloader{Source: src, Writer: &InPlace{Dir: "/a"}, Layout: Mounted{}, Notifier: n, Debounce: 50 * time.Millisecond,
		RetryInterval: time.Hour, Metrics: NewMetrics(prometheus.NewRegistry()), Observer: passes}
	clk := newLoopClock(r)
	start(t, r)
	require.Eventually(t, r.Ready, wait, tick)
	live := liveHash(folder("/a", "..v0", "app.yml", "v0"))
	for round := 0; round < 8; round++ {
		// quiet: the next swap is told as it is seen
		clk.stepAfterPass(t, func(s Status) bool { return s.LiveHash == live }, 2*r.Debounce)
		older, newer := fmt.Sprintf("..v%d", 2*round+1), fmt.Sprintf("..v%d", 2*round+2)
		calls, p := n.calls.Load(), passes.n.Load()
		n.hold.Store(true)
		src.swaps <- source.Swap{Versions: map[string]string{"/a": older}}
		require.Eventually(t, func() bool { return n.calls.Load() == calls+1 }, wait, tick, "round %d: the request on the swap", round)
		src.set(source.Snapshot{Objects: []source.Object{folder("/a", older, "app.yml", older)}})
		src.swaps <- source.Swap{Versions: map[string]string{"/a": newer}}
		n.hold.Store(false)
		n.gate <- struct{}{}
		require.Eventually(t, func() bool { return passes.n.Load() == p+1 }, wait, tick, "round %d: the pass over the older read", round)
		src.set(source.Snapshot{Objects: []source.Object{folder("/a", newer, "app.yml", newer)}})
		clk.stepOutOfBurst(t, r) // the newer read came within the debounce of the pass over the older
		require.Eventually(t, func() bool { return passes.n.Load() == p+2 }, wait, tick, "round %d: the pass over the newer read", round)
		require.EqualValues(t, calls+2, n.calls.Load(), "round %d: one request per swap, none for the older read", round)
		live = liveHash(folder("/a", newer, "app.yml", newer))
	}
}

// liveHash is the LiveHash a pass that makes objs live publishes.
func liveHash(objs ...source.Object) string {
	files, _, _ := Mounted{}.Files(objs)
	return Hash(files)
}

// appView is what an app that reads dir sees: each file's content by its path through the names
// in dir, and "<dangles>" for a name that cannot be read. It runs in the reloader's goroutine,
// so it reports trouble in the view, not through t.
func appView(dir string) map[string]string {
	view := map[string]string{}
	var walk func(p, rel string)
	walk = func(p, rel string) {
		entries, err := os.ReadDir(p)
		if err != nil {
			view[rel+"/"] = "<" + err.Error() + ">"
			return
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "..") {
				continue
			}
			q, r := filepath.Join(p, e.Name()), path.Join(rel, e.Name())
			st, err := os.Stat(q)
			switch {
			case err != nil:
				view[r] = "<dangles>"
			case st.IsDir():
				walk(q, r)
			default:
				b, err := os.ReadFile(q)
				if err != nil {
					b = []byte("<" + err.Error() + ">")
				}
				view[r] = string(b)
			}
		}
	}
	walk(dir, "")
	return view
}

// viewNotifier records what the app sees in dir each time it is told.
type viewNotifier struct {
	dir  string
	mu   sync.Mutex
	seen []map[string]string
}

func (n *viewNotifier) Notify(context.Context) error {
	v := appView(n.dir)
	n.mu.Lock()
	n.seen = append(n.seen, v)
	n.mu.Unlock()
	return nil
}

func (n *viewNotifier) told() []map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.seen)
}

// folderReloader runs a reloader on a real folder source watching dir, quiet after its first
// pass.
func folderReloader(t *testing.T, dir string, opts source.FolderOptions) (*Reloader, *viewNotifier) {
	f, err := source.NewFolders([]string{dir}, opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done }) // registered first, so run after the reloader stopped
	n := &viewNotifier{dir: dir}
	r := &Reloader{Source: f, Writer: &InPlace{Dir: dir}, Layout: Mounted{}, Notifier: n, Debounce: 50 * time.Millisecond,
		RetryInterval: time.Hour, Metrics: NewMetrics(prometheus.NewRegistry())}
	start(t, r)
	require.Eventually(t, r.Ready, wait, tick)
	time.Sleep(2 * r.Debounce)
	return r, n
}

// noneTold waits a while and checks that the app was told nothing more than want.
func noneTold(t *testing.T, n *viewNotifier, want int, why string) {
	t.Helper()
	time.Sleep(300 * time.Millisecond)
	require.Len(t, n.told(), want, "%s: %v", why, n.told())
}

// kubelet renames ..data (its step 9) before it links a new key's name (10) and removes a
// removed key's (11). The app is told of a swap when the names it sees are the new set's:
// at the rename when no name changes, as configmap-reload tells it, after the last name
// otherwise, and never again for the same swap.
func TestReloaderTellsASwapOnceTheAppSeesItsNames(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new map[string]string
		told     int // the step after which the app is told
		linkWait time.Duration
	}{
		{"new content under the same names: told at the rename", map[string]string{"a.yml": "1"},
			map[string]string{"a.yml": "2"}, testvolume.SwapData, time.Minute},
		{"a new key: told once its name is linked", map[string]string{"a.yml": "1"},
			map[string]string{"a.yml": "2", "added.yml": "2"}, testvolume.LinkNewNames, time.Minute},
		{"a removed key: told once its name no longer dangles", map[string]string{"a.yml": "1", "gone.yml": "1"},
			map[string]string{"a.yml": "2"}, testvolume.RemoveOldNames, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			v := testvolume.New(d)
			require.NoError(t, v.Write(tc.old))
			_, n := folderReloader(t, d, source.FolderOptions{LinkWait: tc.linkWait})
			steps := v.Steps(tc.new)
			require.NoError(t, testvolume.Run(steps[:testvolume.SwapData]))
			for step := testvolume.SwapData; step < tc.told; step++ {
				require.NoError(t, steps[step].Do(), steps[step].Name)
				noneTold(t, n, 0, "after "+steps[step].Name)
			}
			require.NoError(t, steps[tc.told].Do(), steps[tc.told].Name)
			require.Eventually(t, func() bool { return len(n.told()) == 1 }, wait, tick, "after %s", steps[tc.told].Name)
			assert.Equal(t, tc.new, n.told()[0], "the app, told, sees the new set")
			require.NoError(t, testvolume.Run(steps[tc.told+1:]))
			noneTold(t, n, 1, "the steps after")
		})
	}
}

// kubelet failed between the swap and linking a new key's name (its step 10 failed; it tries
// again at its next sync): after LinkWait the app is told of what it sees, the new content
// under the old names, and told again once the new name is linked.
func TestReloaderTellsAStalledSwapAndAgainOnceItsNamesAreIn(t *testing.T) {
	d := t.TempDir()
	v := testvolume.New(d)
	require.NoError(t, v.Write(map[string]string{"a.yml": "1"}))
	_, n := folderReloader(t, d, source.FolderOptions{LinkWait: 100 * time.Millisecond})
	steps := v.Steps(map[string]string{"a.yml": "2", "added.yml": "2"})
	require.NoError(t, testvolume.Run(steps[:testvolume.LinkNewNames]))
	require.Eventually(t, func() bool { return len(n.told()) == 1 }, wait, tick, "told after LinkWait")
	assert.Equal(t, map[string]string{"a.yml": "2"}, n.told()[0])
	require.NoError(t, testvolume.Run(steps[testvolume.LinkNewNames:]))
	require.Eventually(t, func() bool { return len(n.told()) == 2 }, wait, tick, "told again once the name is linked")
	assert.Equal(t, map[string]string{"a.yml": "2", "added.yml": "2"}, n.told()[1])
	noneTold(t, n, 2, "the steps after")
}

// A Remove of ..data (kubelet tearing the volume down) is no swap: the app is not told, and the
// reloader keeps the last set while the folder cannot be read.
func TestReloaderTellsNothingWhenDataIsRemoved(t *testing.T) {
	d := t.TempDir()
	v := testvolume.New(d)
	require.NoError(t, v.Write(map[string]string{"app.yml": "v1"}))
	r, n := folderReloader(t, d, source.FolderOptions{})
	require.NoError(t, os.Remove(filepath.Join(d, "..data")))
	require.Eventually(t, func() bool { return r.CurrentStatus().Waiting != "" }, wait, tick, "the folder reads as missing")
	noneTold(t, n, 0, "..data removed")
}
