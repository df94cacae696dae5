package reload

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/configref"
	"github.com/configwave/configwave/internal/source"
	"github.com/configwave/configwave/internal/unpack"
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

func newSwapReloader(t *testing.T, debounce time.Duration, objs ...source.Object) (*Reloader, swapSourceFake, *countingNotifier) {
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
	start(t, r)
	require.Eventually(t, r.Ready, wait, tick)
	time.Sleep(2 * r.Debounce) // quiet after the first pass
	return r, src, n
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
	r, src, n := newSwapReloader(t, 50*time.Millisecond, folder("/a", "..v1", "app.yml", "v1"))

	src.swap(t, n, "..v2", 1, folder("/a", "..v2", "app.yml", "v2"))
	require.Eventually(t, func() bool { return r.CurrentStatus().LastResult == ResultSuccess }, wait, tick)
	time.Sleep(100 * time.Millisecond)
	assert.EqualValues(t, 1, n.calls.Load(), "the pass after the read confirms the request sent on the swap")
	assert.EqualValues(t, 1, testutil.ToFloat64(r.Metrics.Reloads.WithLabelValues(ResultSuccess)))
	count, _ := histogram(t, r.Metrics.ReloadLatency)
	assert.EqualValues(t, 1, count, "one change told, one latency")

	time.Sleep(2 * r.Debounce)
	src.swap(t, n, "..v3", 2, folder("/a", "..v4", "app.yml", "v4"))
	require.Eventually(t, func() bool { return n.calls.Load() == 3 }, wait, tick,
		"the read found a later swap than the one told: the app is told again")

	time.Sleep(2 * r.Debounce)
	src.swap(t, n, "..v5", 4, folder("/a", "..v5", "app.yml", "v4"))
	time.Sleep(200 * time.Millisecond)
	assert.EqualValues(t, 4, n.calls.Load(), "a swap to the same files is told once, as configmap-reload tells it, and not again")
}

func TestReloaderMergesSwapsOfABurst(t *testing.T) {
	// A debounce long enough that the test's own delays on a loaded machine stay inside it.
	r, src, n := newSwapReloader(t, 500*time.Millisecond, folder("/a", "..v1", "app.yml", "v1"))

	src.swap(t, n, "..v2", 1, folder("/a", "..v2", "app.yml", "v2"))
	require.Eventually(t, func() bool { return r.CurrentStatus().LastResult == ResultSuccess }, wait, tick)
	// Within the debounce of that pass: a burst. The swap waits for the read and the pass.
	src.swaps <- source.Swap{Versions: map[string]string{"/a": "..v3"}}
	time.Sleep(10 * time.Millisecond)
	assert.EqualValues(t, 1, n.calls.Load(), "a swap of a burst is not told before it is read")
	src.set(source.Snapshot{Objects: []source.Object{folder("/a", "..v3", "app.yml", "v3")}})
	require.Eventually(t, func() bool { return n.calls.Load() == 2 }, wait, tick, "the pass after the burst tells the app")
	time.Sleep(200 * time.Millisecond)
	assert.EqualValues(t, 2, n.calls.Load())
}

func TestReloaderReportsAFailedRequestOnASwapOnceAndRetries(t *testing.T) {
	r, src, n := newSwapReloader(t, 50*time.Millisecond, folder("/a", "..v1", "app.yml", "v1"))
	n.fail.Store(true)

	src.swap(t, n, "..v2", 1, folder("/a", "..v2", "app.yml", "v2"))
	require.Eventually(t, func() bool { return r.CurrentStatus().LastResult == ResultNotifyFailed }, wait, tick)
	assert.EqualValues(t, 1, n.calls.Load(), "the pass takes the failed request as its own: no second round at once")
	assert.True(t, r.CurrentStatus().NotifyDue)
	n.fail.Store(false)
	require.Eventually(t, func() bool { return !r.CurrentStatus().NotifyDue }, wait, tick, "retried after the retry interval")
	assert.EqualValues(t, 2, n.calls.Load())
}
