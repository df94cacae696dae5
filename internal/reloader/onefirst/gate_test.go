package onefirst

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/reloader/source"
)

// memStore is a Store in memory with the API server's optimistic concurrency.
type memStore struct {
	mu       sync.Mutex
	rec      *Record
	version  int
	down     bool
	putsDown bool // writes fail, reads do not (a write refused, or lost)
}

func (m *memStore) Get(context.Context) (*Record, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return nil, "", errors.New("connection refused")
	}
	if m.rec == nil {
		return nil, "", nil
	}
	cp := *m.rec
	return &cp, string(rune('0' + m.version)), nil
}

func (m *memStore) Put(_ context.Context, r Record, version string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down || m.putsDown {
		return errors.New("connection refused")
	}
	current := ""
	if m.rec != nil {
		current = string(rune('0' + m.version))
	}
	if version != current {
		return ErrConflict
	}
	m.rec, m.version = &r, m.version+1
	return nil
}

// fakeSource hands out the content it is set to.
type fakeSource struct {
	mu   sync.Mutex
	snap source.Snapshot
}

func (f *fakeSource) Run(context.Context)              {}
func (f *fakeSource) WaitForSync(context.Context) bool { return true }
func (f *fakeSource) Changed() <-chan struct{}         { return nil }
func (f *fakeSource) Snapshot() source.Snapshot        { f.mu.Lock(); defer f.mu.Unlock(); return f.snap }
func (f *fakeSource) set(rv string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snap = source.Snapshot{Objects: []source.Object{{Ref: configref.Ref{Kind: configref.ConfigMap, Namespace: "web", Name: "nginx"},
		Data: map[string][]byte{"nginx.conf": []byte("v" + rv)}, Version: "uid/" + rv}}}
}

// pod is one sidecar: its source, gate and app health, on a clock the test moves.
type pod struct {
	src    *fakeSource
	gate   *Gate
	failed string
	state  PodState
	events []string
}

func (p *pod) laid() string { return string(p.gate.Snapshot().Objects[0].Data["nginx.conf"]) }

func TestGateOneFirst(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	store := &memStore{}
	newPod := func(name string) *pod {
		p := &pod{src: &fakeSource{}, state: PodState{Ready: true}}
		p.src.set("1")
		p.gate = NewGate(p.src, store, Options{Pod: name, Soak: 10 * time.Second, Expiry: 20 * time.Second, Clock: clock,
			MaxBusy:    func() int { return 1 },
			ReadPod:    func(context.Context) (PodState, error) { return p.state, nil },
			Failed:     func(context.Context, time.Time, *PodState) string { return p.failed },
			OnRejected: func(c Content, why string) { p.events = append(p.events, "rejected: "+why) },
			OnRefused:  func(c Content, why string) { p.events = append(p.events, "refused: "+why) }})
		return p
	}
	ctx := context.Background()
	a, b, c := newPod("a"), newPod("b"), newPod("c")
	pods := []*pod{a, b, c}
	stepAll := func() {
		for _, p := range pods {
			p.gate.step(ctx)
		}
	}
	stepAll()
	for _, p := range pods {
		assert.Equal(t, "v1", p.laid(), "each pod starts on what its source holds")
	}

	// A good change: a claims it and soaks; the others wait; then b and c follow one at a time.
	for _, p := range pods {
		p.src.set("2")
	}
	stepAll()
	assert.Equal(t, []string{"v2", "v1", "v1"}, []string{a.laid(), b.laid(), c.laid()}, "only the first pod lays it out")
	assert.Equal(t, Soaking, store.rec.State)
	now = now.Add(5 * time.Second)
	stepAll()
	assert.Equal(t, []string{"v2", "v1", "v1"}, []string{a.laid(), b.laid(), c.laid()}, "mid-soak nobody follows")
	now = now.Add(5 * time.Second)
	stepAll()
	assert.Equal(t, Promoted, store.rec.State)
	assert.Equal(t, []string{"v2", "v2", "v1"}, []string{a.laid(), b.laid(), c.laid()}, "one batch of max-unavailable 1 follows")
	now = now.Add(10 * time.Second)
	stepAll() // b leaves the batch
	stepAll() // c joins
	assert.Equal(t, []string{"v2", "v2", "v2"}, []string{a.laid(), b.laid(), c.laid()})

	// A bad change: a's app fails on it; a puts v2 back, the content is rejected, the others
	// never lay it out.
	for _, p := range pods {
		p.src.set("3")
	}
	now = now.Add(time.Minute)
	stepAll()
	require.Equal(t, "v3", a.laid())
	a.failed = "the pod was not Ready"
	now = now.Add(3 * time.Second)
	stepAll()
	assert.Equal(t, Rejected, store.rec.State)
	assert.Equal(t, "the pod was not Ready", store.rec.Reason)
	assert.Equal(t, []string{"v2", "v2", "v2"}, []string{a.laid(), b.laid(), c.laid()}, "the first pod put the good config back")
	assert.Equal(t, []string{"rejected: the pod was not Ready"}, a.events)
	assert.Equal(t, []string{"refused: the pod was not Ready"}, b.events)
	a.failed = ""

	// The next content starts over; a newer one during its soak supersedes it.
	for _, p := range pods {
		p.src.set("4")
	}
	now = now.Add(time.Minute)
	b.gate.step(ctx)
	assert.Equal(t, "v4", b.laid(), "b saw it first")
	for _, p := range pods {
		p.src.set("5")
	}
	c.gate.step(ctx)
	assert.Equal(t, "v5", c.laid(), "a newer content supersedes the one under trial")
	assert.Equal(t, "c", store.rec.First)

	// The first pod goes away mid-soak: after expiry another takes its place.
	pods = []*pod{a, b}
	stepAll()
	assert.Equal(t, []string{"v2", "v2"}, []string{a.laid(), b.laid()}, "a and b wait while c's claim lives; b's trial of v4, overtaken, is put back")
	now = now.Add(21 * time.Second)
	a.gate.step(ctx)
	assert.Equal(t, "a", store.rec.First, "c stopped renewing: a took its place")
	assert.Equal(t, "v5", a.laid())

	// Cut off from the record: a pod keeps what it has and lays out nothing new.
	store.down = true
	b.src.set("6")
	b.gate.step(ctx)
	assert.NotEqual(t, "v6", b.laid())
}

// A pod still soaking a promoted content in its batch when a newer one comes, and fails on the
// newer one, puts the promoted content back, not the one it ran before.
func TestGatePutsBackThePromotedContentMidSoak(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	src := &fakeSource{}
	src.set("1")
	failed := ""
	g := NewGate(src, store, Options{Pod: "b", Soak: 10 * time.Second, Expiry: 20 * time.Second, Clock: func() time.Time { return now },
		Failed: func(context.Context, time.Time, *PodState) string { return failed }})
	ctx := context.Background()
	g.step(ctx) // starts on v1
	// Another pod tried v2 and promoted it.
	store.rec = &Record{Content: ContentID([]Version{{Kind: "ConfigMap", Namespace: "web", Name: "nginx", ResourceVersion: "uid/2"}}), State: Promoted, First: "a", Good: "", Renewed: now}
	src.set("2")
	g.step(ctx) // joins the batch and lays v2 out
	require.Equal(t, "v2", string(g.Snapshot().Objects[0].Data["nginx.conf"]))
	now = now.Add(2 * time.Second) // mid-soak, v3 comes; the batch record still says Promoted v2
	src.set("3")
	g.step(ctx) // claims v3
	require.Equal(t, "v3", string(g.Snapshot().Objects[0].Data["nginx.conf"]))
	failed = "the pod became not Ready"
	now = now.Add(time.Second)
	g.step(ctx)
	assert.Equal(t, Rejected, store.rec.State)
	assert.Equal(t, "v2", string(g.Snapshot().Objects[0].Data["nginx.conf"]), "the promoted content is put back")
}

// With Jitter, a claim waits a moment, and one that another sidecar's write overtook meanwhile
// is not written at all: the record changed, and the decision with it.
func TestGateJitterHoldsAClaimBack(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	src := &fakeSource{}
	src.set("1")
	g := NewGate(src, store, Options{Pod: "b", Soak: 10 * time.Second, Expiry: 20 * time.Second, Jitter: 300 * time.Millisecond, Clock: func() time.Time { return now }})
	ctx := context.Background()
	g.step(ctx)
	src.set("2")
	at := g.step(ctx)
	assert.Nil(t, store.rec, "the claim is held back")
	assert.True(t, at.After(now.Add(-time.Nanosecond)) && !at.After(now.Add(300*time.Millisecond)), "until a moment within the jitter: %s", at)
	now = at
	g.step(ctx)
	require.NotNil(t, store.rec)
	assert.Equal(t, "b", store.rec.First, "then written")

	// The first pod claims a newer content at once: it is off the promoted config already, so
	// the rollout keeps one pod off it.
	src.set("3")
	g.step(ctx)
	require.Equal(t, SnapshotID(src.Snapshot()), store.rec.Content, "claimed without jitter")
	assert.Equal(t, "b", store.rec.First)
	assert.Equal(t, "v3", string(g.Snapshot().Objects[0].Data["nginx.conf"]))

	// Another pod holds its claim over a trial under way back for a whole jitter and up to
	// another, so that the first pod's claim comes first; it then waits instead of writing over
	// it.
	srcC := &fakeSource{}
	srcC.set("1")
	c := NewGate(srcC, store, Options{Pod: "c", Soak: 10 * time.Second, Expiry: 20 * time.Second, Jitter: 300 * time.Millisecond, Clock: func() time.Time { return now }})
	c.step(ctx)
	srcC.set("4")
	at = c.step(ctx)
	assert.True(t, !at.Before(now.Add(300*time.Millisecond)) && !at.After(now.Add(600*time.Millisecond)), "held back a whole jitter and up to another: %s", at.Sub(now))
	src.set("4")
	g.step(ctx)
	require.Equal(t, "b", store.rec.First, "the first pod claimed v4 meanwhile")
	now = at
	c.step(ctx)
	assert.Equal(t, "b", store.rec.First, "no write over the first pod's claim")
	assert.Equal(t, "v1", string(c.Snapshot().Objects[0].Data["nginx.conf"]), "v4 is not laid out on a second pod")
}

// A selector that matches nothing is a content too (no files): the pod starts on it, rather
// than never being ready.
func TestGateStartsOnAnEmptySnapshot(t *testing.T) {
	g := NewGate(&fakeSource{}, &memStore{}, Options{Pod: "a", Soak: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g.step(ctx)
	assert.True(t, g.WaitForSync(ctx), "synced on the empty content")
	assert.NotEmpty(t, SnapshotID(source.Snapshot{}))
	g.step(ctx) // a second step neither panics nor publishes again
}

// The first pod deleted mid-soak: its app drains and goes not Ready, which says nothing of the
// config. It gives its claim back without a verdict, and another pod takes the content at once
// (before, it rejected the content for the whole workload, and its replacement started on it
// alone: the change never reached the others).
func TestGateFirstPodDeletedMidSoakGivesItsClaimBack(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	store := &memStore{}
	newPod := func(name string) *pod {
		p := &pod{src: &fakeSource{}, state: PodState{Ready: true}}
		p.src.set("1")
		p.gate = NewGate(p.src, store, Options{Pod: name, Soak: 10 * time.Second, Expiry: 30 * time.Second, Clock: clock,
			ReadPod: func(context.Context) (PodState, error) { return p.state, nil },
			// The app's health as Health judges it: a pod that was Ready and is not failed.
			Failed: func(_ context.Context, _ time.Time, st *PodState) string {
				if st != nil && !st.Ready {
					return "the pod became not Ready after the config was laid out"
				}
				return ""
			},
			OnRejected: func(c Content, why string) { p.events = append(p.events, "rejected: "+why) }})
		return p
	}
	ctx := context.Background()
	a, b := newPod("a"), newPod("b")
	a.gate.step(ctx)
	b.gate.step(ctx)
	a.src.set("2")
	b.src.set("2")
	a.gate.step(ctx)
	require.Equal(t, "a", store.rec.First)
	require.Equal(t, "v2", a.laid())

	// a is deleted: its app drains (not Ready) while its sidecar still runs.
	a.state = PodState{Ready: false, Terminating: true}
	now = now.Add(2 * time.Second)
	a.gate.step(ctx)
	assert.Equal(t, Soaking, store.rec.State, "no verdict from a pod being deleted")
	assert.Empty(t, store.rec.First, "its claim is given back")
	assert.Empty(t, a.events)
	b.gate.step(ctx)
	assert.Equal(t, "b", store.rec.First, "another pod takes the content at once, not after expiry")
	assert.Equal(t, "v2", b.laid())
}

// A sidecar that stops (SIGTERM) because its pod is being deleted gives back its claim as Run
// returns; one whose container alone stops (a failed liveness probe) keeps it, to resume its
// trial when it starts again.
func TestGateGivesBackItsClaimWhenItStops(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deleted  bool
		released bool
	}{
		{"its pod is being deleted: the claim is given back", true, true},
		{"its container alone restarts: the claim stays, to resume", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &memStore{}
			src := &fakeSource{}
			src.set("1")
			state := PodState{Ready: true}
			g := NewGate(src, store, Options{Pod: "a", Soak: time.Hour, Poll: time.Hour, Sample: time.Hour,
				ReadPod: func(context.Context) (PodState, error) { return state, nil }})
			g.step(context.Background()) // starts on v1
			src.set("2")
			g.step(context.Background()) // claims v2
			require.Equal(t, "a", store.rec.First)
			state.Terminating = tc.deleted
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { g.Run(ctx); close(done) }()
			cancel()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("Run did not return after its context ended")
			}
			store.mu.Lock()
			defer store.mu.Unlock()
			assert.Equal(t, tc.released, store.rec.First == "", "first: %q", store.rec.First)
			assert.Equal(t, Soaking, store.rec.State)
		})
	}
}

// A pod that is not Ready for its own reasons does not claim a new content while a Ready pod
// can; it follows once that content is promoted.
func TestGateUnreadyPodLeavesTheTrialToAReadyOne(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	mk := func(name string, ready bool) *pod {
		p := &pod{src: &fakeSource{}, state: PodState{Ready: ready}}
		p.src.set("1")
		p.gate = NewGate(p.src, store, Options{Pod: name, Soak: 10 * time.Second, Expiry: 30 * time.Second, Clock: func() time.Time { return now },
			ReadPod: func(context.Context) (PodState, error) { return p.state, nil }})
		return p
	}
	ctx := context.Background()
	slow, ready := mk("slow", false), mk("ready", true)
	slow.gate.step(ctx)
	ready.gate.step(ctx)
	slow.src.set("2")
	ready.src.set("2")
	slow.gate.step(ctx)
	assert.Nil(t, store.rec, "the pod that is not Ready does not claim")
	assert.Equal(t, "v1", slow.laid())
	ready.gate.step(ctx)
	require.Equal(t, "ready", store.rec.First)
	now = now.Add(10 * time.Second)
	ready.gate.step(ctx)
	require.Equal(t, Promoted, store.rec.State)
	slow.gate.step(ctx)
	assert.Equal(t, "v2", slow.laid(), "it follows the promoted content")
	assert.Empty(t, store.rec.Batch, "without a place in the batch")
}

// A first pod whose clock runs an hour ahead stamps its renewals in the future: the others
// still take its place a duration after they last saw it renew (before, they waited until the
// future timestamp passed, and the rollout stalled).
func TestGateJudgesExpiryByItsOwnClock(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	src := &fakeSource{}
	src.set("1")
	g := NewGate(src, store, Options{Pod: "b", Soak: 10 * time.Second, Expiry: 30 * time.Second, Clock: func() time.Time { return now }})
	ctx := context.Background()
	g.step(ctx)
	ahead := now.Add(time.Hour)
	src.set("2")
	store.rec = &Record{Content: SnapshotID(src.Snapshot()), State: Soaking, First: "a", Since: ahead, Renewed: ahead, Duration: 30 * time.Second}
	g.step(ctx)
	require.Equal(t, "a", store.rec.First, "a's claim lives")
	now = now.Add(31 * time.Second) // a is gone: no renewal since
	g.step(ctx)
	assert.Equal(t, "b", store.rec.First, "b takes its place a duration after it saw a's last renewal")
}

func TestRunsState(t *testing.T) {
	soaking := &Record{Content: "new", State: Soaking, First: "a", Good: "old"}
	promoted := &Record{Content: "new", State: Promoted, First: "a", Good: "new", Batch: map[string]time.Time{"b": {}}}
	rejected := &Record{Content: "new", State: Rejected, First: "a", Good: "old"}
	for _, tc := range []struct {
		name            string
		rec             *Record
		runs, good, pod string
		want            string
	}{
		{"nothing laid out yet", nil, "", "", "a", ""},
		{"no record: what the pods ran before any change", nil, "c1", "c1", "a", RunsPromoted},
		{"the first pod soaks it", soaking, "new", "old", "a", RunsTrial},
		{"started on it while another pod soaks it", soaking, "new", "new", "c", RunsUntried},
		{"waits on the last good content while another soaks a new one", soaking, "old", "old", "c", RunsPromoted},
		{"in the batch of the promoted content", promoted, "new", "old", "b", RunsTrial},
		{"the promoted content, soaked", promoted, "new", "new", "c", RunsPromoted},
		{"runs the rejected content", rejected, "new", "new", "c", RunsRejected},
		{"just restarted: an older content it found good", rejected, "older", "older", "c", RunsPromoted},
		{"an older content nobody judged", soaking, "older", "x", "c", RunsUntried},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, runsState(tc.rec, tc.runs, tc.good, tc.pod))
		})
	}
}

// Three changes in quick succession: each pod that tried one is overtaken by the next; when the
// newest is rejected, no pod keeps an untried content (before, the two overtaken pods kept
// theirs for ever, unjudged).
func TestGateThreeChangesLeaveNoContentStranded(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	mk := func(name string) *pod {
		p := &pod{src: &fakeSource{}, state: PodState{Ready: true}}
		p.src.set("1")
		p.gate = NewGate(p.src, store, Options{Pod: name, Soak: 10 * time.Second, Expiry: 30 * time.Second, Clock: func() time.Time { return now },
			ReadPod: func(context.Context) (PodState, error) { return p.state, nil },
			Failed:  func(context.Context, time.Time, *PodState) string { return p.failed }})
		return p
	}
	ctx := context.Background()
	a, b, c := mk("a"), mk("b"), mk("c")
	for _, p := range []*pod{a, b, c} {
		p.gate.step(ctx)
	}
	// v2 reaches a first, v3 reaches b first, v4 reaches c first, a second apart.
	for i, p := range []*pod{a, b, c} {
		p.src.set(fmt.Sprint(i + 2))
		p.gate.step(ctx)
		now = now.Add(time.Second)
	}
	require.Equal(t, "c", store.rec.First)
	for _, p := range []*pod{a, b} { // their sources catch up with v4
		p.src.set("4")
		p.gate.step(ctx)
	}
	c.failed = "the pod became not Ready"
	c.gate.step(ctx)
	require.Equal(t, Rejected, store.rec.State)
	for _, p := range []*pod{a, b, c} {
		p.gate.step(ctx)
	}
	assert.Equal(t, []string{"v1", "v1", "v1"}, []string{a.laid(), b.laid(), c.laid()}, "every pod back on the last promoted config")
}

// A pod whose app failed on its trial puts its good config back at once, before the record
// says so: a rejection whose write fails (a conflict, an outage) is written on a later step,
// and the bad config is never laid out again meanwhile (before, the pod kept it until the write
// succeeded). Cut off from the record altogether, a failure it can see without the API (a
// refused reload) puts the good config back too.
func TestGateRevertsLocallyBeforeTheRecord(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	src := &fakeSource{}
	src.set("1")
	failed := ""
	g := NewGate(src, store, Options{Pod: "a", Soak: 10 * time.Second, Expiry: 30 * time.Second, Clock: func() time.Time { return now },
		Failed: func(context.Context, time.Time, *PodState) string { return failed }})
	ctx := context.Background()
	laid := func() string { return string(g.Snapshot().Objects[0].Data["nginx.conf"]) }
	g.step(ctx)
	src.set("2")
	g.step(ctx)
	require.Equal(t, "v2", laid())

	failed = "the app refused the reload request"
	store.putsDown = true
	now = now.Add(time.Second)
	g.step(ctx)
	assert.Equal(t, "v1", laid(), "put back before the record says so")
	assert.Equal(t, Soaking, store.rec.State, "the write failed")
	now = now.Add(time.Second)
	g.step(ctx)
	assert.Equal(t, "v1", laid(), "never laid out again while the record lags")
	store.putsDown = false
	g.step(ctx)
	assert.Equal(t, Rejected, store.rec.State, "recorded once the write goes through")
	assert.Equal(t, "the app refused the reload request", store.rec.Reason)
	assert.Equal(t, "v1", laid())

	// Cut off from the record while soaking v3: a refused reload puts v1 back all the same.
	src.set("3")
	failed = ""
	g.step(ctx)
	require.Equal(t, "v3", laid())
	store.down = true
	failed = "the app refused the reload request"
	g.step(ctx)
	assert.Equal(t, "v1", laid(), "put back while the record cannot be read")
	store.down = false
	g.step(ctx)
	assert.Equal(t, Rejected, store.rec.State, "and recorded once it can")
	assert.Equal(t, "v1", laid())
}

// A pod deleted while the rejection it made is not on the record yet writes it as it stops:
// otherwise its claim would expire and the next pod lay the bad config out.
func TestGateStoppingWritesAnUnrecordedRejection(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	src := &fakeSource{}
	src.set("1")
	failed, state := "", PodState{Ready: true}
	g := NewGate(src, store, Options{Pod: "a", Soak: time.Hour, Poll: time.Hour, Sample: time.Hour, Clock: func() time.Time { return now },
		ReadPod: func(context.Context) (PodState, error) { return state, nil },
		Failed:  func(context.Context, time.Time, *PodState) string { return failed }})
	ctx := context.Background()
	g.step(ctx)
	src.set("2")
	g.step(ctx)
	failed, store.putsDown = "the app refused the reload request", true
	g.step(ctx)
	require.Equal(t, Soaking, store.rec.State, "the rejection could not be written")
	store.mu.Lock()
	store.putsDown = false
	store.mu.Unlock()
	state.Terminating = true
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { g.Run(runCtx); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after its context ended")
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	assert.Equal(t, Rejected, store.rec.State, "written as it stopped")
}

// contentOf is the content id of what fakeSource.set(rv) holds.
func contentOf(rv string) string {
	src := &fakeSource{}
	src.set(rv)
	return SnapshotID(src.Snapshot())
}

// newPods makes sidecars of one workload on one record and one clock the test moves.
func newPods(store *memStore, clock *time.Time, names ...string) []*pod {
	var pods []*pod
	for _, name := range names {
		p := &pod{src: &fakeSource{}, state: PodState{Ready: true}}
		p.src.set("1")
		p.gate = NewGate(p.src, store, Options{Pod: name, Soak: 10 * time.Second, Expiry: 20 * time.Second, Clock: func() time.Time { return *clock },
			MaxBusy:           func() int { return 1 },
			ReadPod:           func(context.Context) (PodState, error) { return p.state, nil },
			Failed:            func(context.Context, time.Time, *PodState) string { return p.failed },
			OnRejected:        func(c Content, why string) { p.events = append(p.events, "rejected: "+why) },
			OnStartedRejected: func(c Content, why string) { p.events = append(p.events, "started on rejected: "+why) }})
		pods = append(pods, p)
	}
	return pods
}

// A pod of the batch that rejects a content after its promotion takes it back from every pod
// that runs it, to the content promoted before it; the record's good content names that one,
// never the rejected content (before, the first pod and the batches done kept it: the fleet
// split, and the Lease's good content was the rejected one).
func TestGateRejectionAfterPromotionTakesItBackEverywhere(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	pods := newPods(store, &now, "a", "b", "c")
	a, b, c := pods[0], pods[1], pods[2]
	ctx := context.Background()
	stepAll := func() {
		for _, p := range pods {
			p.gate.step(ctx)
		}
	}
	stepAll()
	v1 := store.rec
	require.Nil(t, v1, "no change yet")
	laid := func() []string { return []string{a.laid(), b.laid(), c.laid()} }
	for _, p := range pods {
		p.src.set("2")
	}
	stepAll() // a claims v2
	now = now.Add(11 * time.Second)
	stepAll() // a promotes; b joins
	require.Equal(t, Promoted, store.rec.State)
	good1 := store.rec.Before
	require.NotEmpty(t, good1, "the promotion keeps the content before it")
	now = now.Add(11 * time.Second)
	stepAll() // b leaves; c joins
	stepAll()
	require.Equal(t, []string{"v2", "v2", "v2"}, laid())
	require.Contains(t, store.rec.Batch, "c")

	c.failed = "the pod became not Ready"
	now = now.Add(time.Second)
	c.gate.step(ctx)
	assert.Equal(t, Rejected, store.rec.State)
	assert.Equal(t, good1, store.rec.Good, "the record's good content is the one before the rejected one")
	c.failed = ""
	stepAll()
	assert.Equal(t, []string{"v1", "v1", "v1"}, laid(), "every pod back on the content before")
	stepAll()
	assert.Equal(t, []string{"v1", "v1", "v1"}, laid(), "and stays there")

	// A next change rolls as usual, and a rejection of it puts v1 back, not the rejected v2.
	for _, p := range pods {
		p.src.set("3")
	}
	now = now.Add(time.Minute)
	stepAll()
	require.Equal(t, "v3", a.laid())
	a.failed = "503"
	a.gate.step(ctx)
	assert.Equal(t, []string{"v1", "v1", "v1"}, laid())
}

// A pod started on a content while another pod tries it (a scale-up), whose first pod is then
// gone without giving its claim back (its node lost): it claims the content once the claim
// expires, so that it is judged and the record moves on (before, nothing woke it: with one
// replica the claim of a dead pod was never resolved).
func TestGateReplacementPodClaimsADeadFirstPodsContent(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	a := newPods(store, &now, "a")[0]
	ctx := context.Background()
	a.gate.step(ctx)
	a.src.set("2")
	a.gate.step(ctx)
	require.Equal(t, "a", store.rec.First)
	// a's node is lost: a renews nothing more. Its replacement starts on what the source holds.
	replacement := newPods(store, &now, "a-2")[0]
	replacement.src.set("2")
	replacement.gate.step(ctx)
	require.Equal(t, "v2", replacement.laid())
	next := replacement.gate.step(ctx)
	require.False(t, next.IsZero(), "it looks again when the dead pod's claim expires")
	assert.Equal(t, now.Add(20*time.Second), next)
	now = next
	replacement.gate.step(ctx)
	assert.Equal(t, "a-2", store.rec.First, "it claims the content to judge it")
	assert.Equal(t, Soaking, store.rec.State)
	now = now.Add(11 * time.Second)
	replacement.gate.step(ctx)
	assert.Equal(t, Promoted, store.rec.State)
}

// An object of the config deleted is no content: no pod claims, promotes or puts back to it,
// and each keeps what it runs until the object is back (before, the "missing" content was
// claimed and promoted with nothing changed, and became what a rejection put back).
func TestGateMissingSourceIsNoContent(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	pods := newPods(store, &now, "a", "b")
	ctx := context.Background()
	for _, p := range pods {
		p.gate.step(ctx)
	}
	for _, p := range pods {
		p.src.mu.Lock()
		p.src.snap = source.Snapshot{Missing: []configref.Ref{{Kind: configref.ConfigMap, Namespace: "web", Name: "nginx"}}}
		p.src.mu.Unlock()
	}
	for range 3 {
		for _, p := range pods {
			p.gate.step(ctx)
		}
		now = now.Add(11 * time.Second)
	}
	assert.Nil(t, store.rec, "nothing claimed")
	for _, p := range pods {
		assert.Equal(t, "v1", p.laid())
	}
	for _, p := range pods {
		p.src.set("3")
	}
	pods[0].gate.step(ctx)
	require.NotNil(t, store.rec)
	assert.Equal(t, Soaking, store.rec.State, "the object back: its content is tried as any")
	assert.Equal(t, "v3", pods[0].laid())
}

// A pod started on a content while another pod tried it (a scale-up mid-soak) has no earlier
// config to go back to when the content is rejected: it says so once (before, it kept the
// rejected content silently).
func TestGatePodStartedOnAContentRejectedLaterSaysSo(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	a := newPods(store, &now, "a")[0]
	ctx := context.Background()
	a.gate.step(ctx)
	a.src.set("2")
	a.gate.step(ctx)
	late := newPods(store, &now, "late")[0]
	late.src.set("2")
	late.gate.step(ctx)
	require.Equal(t, "v2", late.laid())
	a.failed = "the pod became not Ready"
	a.gate.step(ctx)
	require.Equal(t, Rejected, store.rec.State)
	late.gate.step(ctx)
	late.gate.step(ctx)
	assert.Equal(t, "v2", late.laid(), "nothing earlier to put back")
	assert.Equal(t, []string{"started on rejected: the pod became not Ready"}, late.events, "said once")
	assert.Equal(t, RunsRejected, late.gate.CurrentStatus().Runs)
}

// A pod that took a later promotion than the one a rejection goes back to (it was still on an
// older content when the record's "before" was promoted) goes back to its own content before
// the rejected one, never stays on the rejected content (before, it kept it, and said it had
// started on it).
func TestGateRejectionAfterPromotionReachesAPodOfAnotherBefore(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	c := newPods(store, &now, "c")[0]
	ctx := context.Background()
	c.src.set("4")
	c.gate.step(ctx) // starts on v4
	store.rec = &Record{Content: contentOf("11"), State: Promoted, First: "a", Good: contentOf("11"), Before: contentOf("9"), Renewed: now}
	c.src.set("11")
	c.gate.step(ctx) // joins v11's batch
	require.Equal(t, "v11", c.laid())
	now = now.Add(11 * time.Second)
	c.gate.step(ctx) // leaves it: v11 good, v4 before
	require.NotContains(t, store.rec.Batch, "c")
	r := *store.rec
	r.State, r.Good, r.Reason = Rejected, contentOf("9"), "the pod became not Ready"
	store.rec, store.version = &r, store.version+1 // d rejects v11 from its batch
	c.gate.step(ctx)
	assert.Equal(t, "v4", c.laid(), "back on its own content before the rejected one")
	assert.Empty(t, c.events, "it did not start on the rejected content")
}

// A pod whose rejection could not be written before another pod took the content over (its
// claim expired in an outage) keeps its good config, and never claims the content again: not
// while the other pod's claim lives, nor once it expires (before, it forgot its rejection at
// once and could lay the content out again).
func TestGateUnwrittenRejectionTakenOverKeepsTheGoodConfig(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	a := newPods(store, &now, "a")[0]
	ctx := context.Background()
	a.gate.step(ctx)
	a.src.set("2")
	a.gate.step(ctx)
	require.Equal(t, "v2", a.laid())
	a.failed, store.putsDown = "the app refused the reload request", true
	a.gate.step(ctx)
	require.Equal(t, "v1", a.laid(), "put back at once")
	a.failed = ""
	now = now.Add(30 * time.Second) // the outage outlives a's claim: b takes the content over
	r := *store.rec
	r.First, r.Since, r.Renewed = "b", now, now
	store.mu.Lock()
	store.rec, store.version, store.putsDown = &r, store.version+1, false
	store.mu.Unlock()
	for range 3 {
		a.gate.step(ctx)
		assert.Equal(t, "v1", a.laid(), "keeps its good config while b judges")
		assert.Equal(t, "b", store.rec.First, "writes nothing over b's claim")
		assert.Equal(t, Soaking, store.rec.State)
		now = now.Add(15 * time.Second) // past b's claim too, in the end
	}
}

// A pod cut off while a content it ran was rejected after its promotion, and a newer content
// claimed over the rejection before it read the record again: the record carries what was taken
// back, and the pod puts its content before it back (before, it kept the rejected content until
// the newer one reached it, or for ever if that was rejected too).
func TestGatePodThatMissedARejectionPutsItsContentBack(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	a := newPods(store, &now, "a")[0]
	ctx := context.Background()
	a.gate.step(ctx) // v1
	a.src.set("12")
	a.gate.step(ctx) // claims v12
	now = now.Add(11 * time.Second)
	a.gate.step(ctx) // promotes it: good v12, before v1
	require.Equal(t, Promoted, store.rec.State)
	// Cut off: meanwhile a batch pod rejected v12, and b claimed v13 over the rejection.
	store.rec = &Record{Content: contentOf("13"), State: Soaking, First: "b", Since: now, Renewed: now, Good: contentOf("1"), TakenBack: contentOf("12")}
	store.version++
	a.src.set("13")
	a.gate.step(ctx)
	assert.Equal(t, "v1", a.laid(), "v12 was taken back: the pod puts its content before it back")
	assert.Equal(t, "b", store.rec.First, "b's claim stands")
}
