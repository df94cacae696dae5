package reload

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/reloader/notify"
	"github.com/configwave/configwave/internal/reloader/source"
	"github.com/configwave/configwave/internal/reloader/unpack"
)

// fakeSource is a hand-driven source; the real one is tested against the control plane.
type fakeSource struct {
	mu      sync.Mutex
	snap    source.Snapshot
	changed chan struct{}
}

func newFakeSource(objs ...source.Object) *fakeSource {
	return &fakeSource{snap: source.Snapshot{Objects: objs}, changed: make(chan struct{}, 1)}
}

func (f *fakeSource) WaitForSync(context.Context) bool { return true }
func (f *fakeSource) Changed() <-chan struct{}         { return f.changed }
func (f *fakeSource) Snapshot() source.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap
}

func (f *fakeSource) set(snap source.Snapshot) {
	f.mu.Lock()
	f.snap = snap
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

type countingNotifier struct {
	calls atomic.Int32
	fail  atomic.Bool
}

func (n *countingNotifier) Notify(context.Context) error {
	n.calls.Add(1)
	if n.fail.Load() {
		return errors.New("answered 503 Service Unavailable")
	}
	return nil
}

func start(t *testing.T, r *Reloader) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

func newReloader(t *testing.T, src *fakeSource, n notify.Notifier) (*Reloader, string) {
	root := t.TempDir()
	return &Reloader{
		Source:        src,
		Writer:        unpack.New(root),
		Layout:        Layout{ConfigMapMode: 0o644, SecretMode: 0o600},
		Notifier:      n,
		Debounce:      50 * time.Millisecond,
		RetryInterval: 50 * time.Millisecond,
		Metrics:       NewMetrics(prometheus.NewRegistry()),
	}, root
}

func fileIs(root, name, want string) func() bool {
	return func() bool {
		b, err := os.ReadFile(filepath.Join(root, name))
		return err == nil && string(b) == want
	}
}

const wait, tick = 5 * time.Second, 5 * time.Millisecond

// loopClock is a Reloader's clock in a test: its time moves only when stepped, so that neither
// a debounce nor a retry interval can pass while a slow machine runs the test, and it notes the
// status the loop had published when it last took the time.
type loopClock struct {
	*testingclock.FakeClock
	status *atomic.Pointer[Status]
	read   atomic.Pointer[Status]
}

// newLoopClock gives r a loopClock; before Run.
func newLoopClock(r *Reloader) *loopClock {
	c := &loopClock{FakeClock: testingclock.NewFakeClock(time.Now()), status: &r.status}
	r.clk = c
	return c
}

func (c *loopClock) Now() time.Time {
	c.read.Store(c.status.Load())
	return c.FakeClock.Now()
}

// stepAfterPass steps the clock by d once the loop has published a status for which published
// holds and then taken the time. That time, the first the loop takes after it publishes a pass,
// is when the pass ended, which the debounce counts from: stepped before it, the clock would
// move the pass's end along with it and make no quiet.
func (c *loopClock) stepAfterPass(t *testing.T, published func(Status) bool, d time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		p := c.status.Load()
		return p != nil && published(*p) && c.read.Load() == p
	}, wait, tick, "the loop took the end of the pass")
	c.Step(d)
}

// stepOutOfBurst steps the clock by the debounce once the loop waits out a burst: its two
// debounce timers (quiet and deadline) are the only ones a test's loop has then.
func (c *loopClock) stepOutOfBurst(t *testing.T, r *Reloader) {
	t.Helper()
	require.Eventually(t, func() bool { return c.Waiters() == 2 }, wait, tick, "the loop waits out the burst")
	c.Step(r.Debounce)
}

func TestReloaderFirstUnpackThenOneReloadPerChange(t *testing.T) {
	src := newFakeSource(cm("web", "app", "app.yaml", "v1"))
	n := &countingNotifier{}
	r, root := newReloader(t, src, n)
	start(t, r)

	require.Eventually(t, r.Ready, wait, tick)
	assert.True(t, fileIs(root, "app.yaml", "v1")())
	assert.Zero(t, n.calls.Load(), "the first set is read by the app at start; nothing to reload")

	src.set(source.Snapshot{Objects: []source.Object{cm("web", "app", "app.yaml", "v2")}})
	require.Eventually(t, func() bool { return n.calls.Load() == 1 }, wait, tick)
	assert.True(t, fileIs(root, "app.yaml", "v2")())

	// A metadata-only update or a resync: same content, no write, no reload.
	src.set(source.Snapshot{Objects: []source.Object{cm("web", "app", "app.yaml", "v2")}})
	time.Sleep(200 * time.Millisecond)
	assert.EqualValues(t, 1, n.calls.Load())
	assert.EqualValues(t, 1, testutil.ToFloat64(r.Metrics.Reloads.WithLabelValues(ResultSuccess)))
	count, _ := histogram(t, r.Metrics.ReloadLatency)
	assert.EqualValues(t, 1, count, "one change told, one latency; the first unpack and a change with the same content count none")
}

// histogram reads a histogram's sample count and sum.
func histogram(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	require.NoError(t, h.Write(&m))
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

func TestObserveLatency(t *testing.T) {
	t0 := time.Unix(1000, 0)
	now := t0.Add(250 * time.Millisecond)
	for name, tc := range map[string]struct {
		changedAt time.Time
		o         outcome
		observed  bool
		pending   time.Time
	}{
		"told":                              {changedAt: t0, o: outcome{notified: true}, observed: true},
		"told on start, no change pending":  {o: outcome{notified: true}},
		"the app did not answer: retried":   {changedAt: t0, o: outcome{retry: true}, pending: t0},
		"the same content: nothing to tell": {changedAt: t0},
		"rejected by the check":             {changedAt: t0, o: outcome{err: errors.New("rejected")}},
	} {
		t.Run(name, func(t *testing.T) {
			r := &Reloader{Metrics: NewMetrics(prometheus.NewRegistry())}
			assert.Equal(t, tc.pending, r.observeLatency(tc.changedAt, tc.o, now))
			count, sum := histogram(t, r.Metrics.ReloadLatency)
			if tc.observed {
				assert.EqualValues(t, 1, count)
				assert.InDelta(t, 0.25, sum, 1e-9)
			} else {
				assert.Zero(t, count)
			}
		})
	}
}

// The first change after a quiet period is applied at once; the 49 that follow within the
// debounce are one more reload, of the last. The clock moves only when stepped, so however slowly
// the burst is applied it stays within the debounce.
func TestReloaderBurstGivesOneReloadOfTheFinalContent(t *testing.T) {
	src := newFakeSource(cm("web", "app", "n", "0"))
	n := &countingNotifier{}
	r, root := newReloader(t, src, n)
	r.Debounce = 100 * time.Millisecond
	clk := newLoopClock(r)
	start(t, r)
	require.Eventually(t, r.Ready, wait, tick)
	clk.stepAfterPass(t, func(s Status) bool { return s.Ready }, r.Debounce)

	change := func(i int) {
		src.set(source.Snapshot{Objects: []source.Object{cm("web", "app", "n", string(rune('0'+i%10)), "i", itoa(i))}})
	}
	change(1)
	require.Eventually(t, func() bool { return n.calls.Load() == 1 }, wait, tick, "the first change at once")
	assert.True(t, fileIs(root, "i", "01")())
	for i := 2; i <= 50; i++ {
		change(i)
	}
	clk.stepOutOfBurst(t, r)
	require.Eventually(t, fileIs(root, "i", "50"), wait, tick)
	require.Eventually(t, func() bool { return n.calls.Load() >= 2 }, wait, tick)
	time.Sleep(100 * time.Millisecond)
	assert.EqualValues(t, 2, n.calls.Load(), "the first change at once, the rest of the burst in one more reload")
}

func itoa(i int) string { return string([]byte{byte('0' + i/10), byte('0' + i%10)}) }

func TestReloaderRejectedConfigKeepsTheLastGoodSet(t *testing.T) {
	src := newFakeSource(cm("web", "app", "app.yaml", "good"))
	n := &countingNotifier{}
	r, root := newReloader(t, src, n)
	r.Check = func(_ context.Context, dir string) error {
		b, _ := os.ReadFile(filepath.Join(dir, "app.yaml"))
		if string(b) == "bad" {
			return ErrRejected
		}
		return nil
	}
	start(t, r)
	require.Eventually(t, r.Ready, wait, tick)

	src.set(source.Snapshot{Objects: []source.Object{cm("web", "app", "app.yaml", "bad")}})
	require.Eventually(t, func() bool { return r.CurrentStatus().LastResult == ResultValidationFailed }, wait, tick)
	assert.True(t, r.Ready(), "a rejected config must not take the replica out of its Service")
	assert.True(t, fileIs(root, "app.yaml", "good")())
	assert.Zero(t, n.calls.Load())
	assert.EqualValues(t, 1, testutil.ToFloat64(r.Metrics.Reloads.WithLabelValues(ResultValidationFailed)))
	assert.Zero(t, testutil.ToFloat64(r.Metrics.LastReloadSuccessful), "the alert metric says it")
	assert.Contains(t, r.CurrentStatus().LastError, "kept out")

	src.set(source.Snapshot{Objects: []source.Object{cm("web", "app", "app.yaml", "fixed")}})
	require.Eventually(t, func() bool { return n.calls.Load() == 1 }, wait, tick)
	assert.True(t, fileIs(root, "app.yaml", "fixed")())
	// The status is published once the pass that told the app ends, a moment after the call.
	require.Eventually(t, func() bool { return r.CurrentStatus().LastResult == ResultSuccess }, wait, tick)
	assert.EqualValues(t, 1, testutil.ToFloat64(r.Metrics.LastReloadSuccessful))
}

func TestReloaderRetriesAFailedNotification(t *testing.T) {
	src := newFakeSource(cm("web", "app", "app.yaml", "v1"))
	n := &countingNotifier{}
	n.fail.Store(true)
	r, _ := newReloader(t, src, n)
	start(t, r)
	require.Eventually(t, r.Ready, wait, tick)

	src.set(source.Snapshot{Objects: []source.Object{cm("web", "app", "app.yaml", "v2")}})
	require.Eventually(t, func() bool { return n.calls.Load() >= 2 }, wait, tick, "retried without a new change")
	assert.True(t, r.CurrentStatus().NotifyDue)
	assert.True(t, r.Ready(), "readiness is only about the first unpack")
	n.fail.Store(false)
	require.Eventually(t, func() bool { return !r.CurrentStatus().NotifyDue }, wait, tick)
	calls := n.calls.Load()
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, calls, n.calls.Load(), "no more requests once the app was told")
	count, _ := histogram(t, r.Metrics.ReloadLatency)
	assert.EqualValues(t, 1, count, "the retries are part of the one change's latency")
}

func TestReloaderWaitsForMissingSourcesAndKeepsFilesWhenDeleted(t *testing.T) {
	ref := configref.Ref{Kind: configref.ConfigMap, Namespace: "web", Name: "app"}
	src := &fakeSource{snap: source.Snapshot{Missing: []configref.Ref{ref}}, changed: make(chan struct{}, 1)}
	started := 0
	r, root := newReloader(t, src, nil)
	n := &countingNotifier{}
	r.OnFirstUnpack = func() (notify.Notifier, error) { started++; return n, nil }
	start(t, r)
	time.Sleep(100 * time.Millisecond)
	assert.False(t, r.Ready())
	assert.Zero(t, started, "the app must not start without its config")

	src.set(source.Snapshot{Objects: []source.Object{cm("web", "app", "app.yaml", "v1")}})
	require.Eventually(t, r.Ready, wait, tick)
	assert.Equal(t, 1, started)

	src.set(source.Snapshot{Missing: []configref.Ref{ref}})
	time.Sleep(200 * time.Millisecond)
	assert.True(t, fileIs(root, "app.yaml", "v1")(), "deleting the ConfigMap keeps the last files")

	src.set(source.Snapshot{Objects: []source.Object{cm("web", "app", "app.yaml", "v2")}})
	require.Eventually(t, fileIs(root, "app.yaml", "v2"), wait, tick)
	require.Eventually(t, func() bool { return n.calls.Load() == 1 }, wait, tick)
	assert.Equal(t, 1, started)
}

func TestReloaderInvalidConfigIsReportedAndKeepsFiles(t *testing.T) {
	src := newFakeSource(cm("web", "a", "app.yaml", "v1"))
	r, root := newReloader(t, src, &countingNotifier{})
	start(t, r)
	require.Eventually(t, r.Ready, wait, tick)
	src.set(source.Snapshot{Objects: []source.Object{cm("web", "a", "app.yaml", "v2"), cm("web", "b", "app.yaml", "v3")}})
	require.Eventually(t, func() bool { return r.CurrentStatus().LastResult == ResultInvalidConfig }, wait, tick)
	assert.True(t, r.Ready())
	assert.Contains(t, r.CurrentStatus().LastError, "would both unpack to")
	assert.True(t, fileIs(root, "app.yaml", "v1")())
	assert.EqualValues(t, 1, testutil.ToFloat64(r.Metrics.Reloads.WithLabelValues(ResultInvalidConfig)))
}

type recordedEvents struct {
	mu   sync.Mutex
	list []string
}

func (e *recordedEvents) Event(eventtype, reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, eventtype+" "+reason+" "+message)
}

func (e *recordedEvents) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.list)
}

// Selector mode: an object that clashes is left out, said once (Event, log, metric, /status),
// and the others keep updating; once the clash is gone it is back in.
func TestReloaderLeavesOutWhatCannotBeLaidOut(t *testing.T) {
	src := newFakeSource(cm("a", "dash", "d.json", "1"), cm("a", "good", "g.json", "1"), cm("b", "dash", "d.json", "2"))
	n := &countingNotifier{}
	r, root := newReloader(t, src, n)
	r.Layout = Layout{PerObject: true, ConfigMapMode: 0o644, Isolate: true}
	events := &recordedEvents{}
	r.Events = events
	start(t, r)
	require.Eventually(t, r.Ready, wait, tick)
	assert.True(t, fileIs(root, "dash/d.json", "1")(), "the first namespace keeps the folder")
	assert.True(t, fileIs(root, "good/g.json", "1")())
	status := r.CurrentStatus()
	require.Len(t, status.LeftOut, 1)
	assert.Contains(t, status.LeftOut[0], `configmap b/dash: configmap a/dash and configmap b/dash would both unpack into folder "dash"`)
	assert.EqualValues(t, 1, testutil.ToFloat64(r.Metrics.LeftOut))
	assert.Equal(t, ResultSuccess, orSuccess(status.LastResult), "a left-out object is not a failed set")

	src.set(source.Snapshot{Objects: []source.Object{cm("a", "dash", "d.json", "1"), cm("a", "good", "g.json", "2"), cm("b", "dash", "d.json", "3")}})
	require.Eventually(t, fileIs(root, "good/g.json", "2"), wait, tick, "a change to another object still lands")
	require.Eventually(t, func() bool { return n.calls.Load() == 1 }, wait, tick)
	leftOut := 0
	for _, e := range events.all() {
		if strings.Contains(e, "ConfigLeftOut") {
			leftOut++
			assert.Equal(t, `Warning ConfigLeftOut configmap b/dash left out of the config, the other objects keep updating: configmap a/dash and configmap b/dash would both unpack into folder "dash": select only one, or use --layout=flat`, e)
		}
	}
	assert.Equal(t, 1, leftOut, "said once, not on every pass")

	src.set(source.Snapshot{Objects: []source.Object{cm("a", "good", "g.json", "2"), cm("b", "dash", "d.json", "3")}})
	require.Eventually(t, fileIs(root, "dash/d.json", "3"), wait, tick, "the clash gone, the object is back in")
	require.Eventually(t, func() bool { return len(r.CurrentStatus().LeftOut) == 0 }, wait, tick)
	assert.Zero(t, testutil.ToFloat64(r.Metrics.LeftOut))
}

func orSuccess(result string) string {
	if result == "" {
		return ResultSuccess
	}
	return result
}
