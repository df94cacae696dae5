package onefirst

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeptFileRoundTrip(t *testing.T) {
	f := KeptFile{Path: filepath.Join(t.TempDir(), KeptName)}
	_, ok, err := f.Load()
	require.NoError(t, err)
	assert.False(t, ok, "no state before the first save")

	src := &fakeSource{}
	src.set("1")
	good := src.Snapshot()
	src.set("2")
	laid := src.Snapshot()
	for _, tc := range []struct {
		name string
		kept Kept
	}{
		{"a trial over a good content", Kept{Lease: "l", Laid: &KeptSet{ID: SnapshotID(laid), Snapshot: &laid}, Good: &KeptSet{ID: SnapshotID(good), Snapshot: &good}}},
		{"the good content laid out, kept once", Kept{Lease: "l", Laid: &KeptSet{ID: SnapshotID(good), Snapshot: &good}, Good: &KeptSet{ID: SnapshotID(good), Snapshot: &good}}},
		{"no good content known", Kept{Lease: "l", Laid: &KeptSet{ID: SnapshotID(laid), Snapshot: &laid}}},
		{"the good content and the one before it (a rejection after promotion puts it back)", Kept{Lease: "l", Laid: &KeptSet{ID: SnapshotID(laid), Snapshot: &laid},
			Good: &KeptSet{ID: SnapshotID(laid), Snapshot: &laid}, Before: &KeptSet{ID: SnapshotID(good), Snapshot: &good}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, f.Save(tc.kept))
			info, err := os.Stat(f.Path)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "it holds what the config holds")
			got, ok, err := f.Load()
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, tc.kept, got)
		})
	}
}

func TestParseKeptRefuses(t *testing.T) {
	src := &fakeSource{}
	src.set("1")
	snap := src.Snapshot()
	for _, tc := range []struct{ name, body, err string }{
		{"another format", `{"lease":"l"}`, "not a state this reloader wrote"},
		{"not JSON", keptVersion + "{", "unexpected end"},
		{"nothing laid out", keptVersion + `{"lease":"l"}`, "names no content laid out"},
		{"objects that are not the content named", keptVersion + `{"lease":"l","laid":{"id":"0123","snapshot":{"Objects":[]}}}`, "does not match the objects kept for it"},
		{"a good content without its objects", keptVersion + `{"lease":"l","laid":{"id":"` + SnapshotID(snap) + `","snapshot":{}},"good":{"id":"x"}}`, "has no objects"},
		{"a content before without its objects", keptVersion + `{"lease":"l","laid":{"id":"` + SnapshotID(snap) + `","snapshot":{}},"before":{"id":"x"}}`, "has no objects"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseKept([]byte(tc.body))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

func FuzzParseKept(f *testing.F) {
	f.Add([]byte(keptVersion + `{"lease":"l","laid":{"id":"x","snapshot":{}}}`))
	f.Add([]byte(keptVersion + `{"lease":"l","laid":{"id":"a","snapshot":{"Objects":[{"Kind":"ConfigMap","Name":"n","Data":{"k":"dg=="}}]}},"good":{"id":"a"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := parseKept(b)
		if err != nil {
			return
		}
		// What it accepts names content it holds: ids match their objects.
		if SnapshotID(*k.Laid.Snapshot) != k.Laid.ID || k.Good != nil && SnapshotID(*k.Good.Snapshot) != k.Good.ID || k.Before != nil && SnapshotID(*k.Before.Snapshot) != k.Before.ID {
			t.Fatalf("accepted a state whose ids do not match their objects: %q", b)
		}
	})
}

// A sidecar restarted after its pod rejected a content (an OOM kill, a failed liveness probe):
// it keeps the good config laid out, never the rejected one its source holds (before, it laid
// the newest content out at start, called it good, and could never put it back).
func TestGateRestartAfterARejectionKeepsTheGoodConfig(t *testing.T) {
	p := newRestartable(t)
	ctx := context.Background()
	g := p.gate()
	g.step(ctx)
	p.src.set("2")
	g.step(ctx)
	require.Equal(t, "v2", string(g.Snapshot().Objects[0].Data["nginx.conf"]))
	p.failed = "the pod became not Ready"
	p.now = p.now.Add(2 * time.Second)
	g.step(ctx)
	require.Equal(t, Rejected, p.store.rec.State)
	require.Equal(t, "v1", string(g.Snapshot().Objects[0].Data["nginx.conf"]), "put back")

	// The sidecar's container is killed and restarted: a new process, the same emptyDir.
	p.failed = ""
	p.now = p.now.Add(time.Second)
	g = p.gate()
	g.step(ctx)
	assert.Equal(t, "v1", string(g.Snapshot().Objects[0].Data["nginx.conf"]), "the restarted sidecar keeps the good config")
	assert.Equal(t, Refuse, g.CurrentStatus().Doing)
	assert.False(t, g.CurrentStatus().RunsRejected)
}

// The first pod's sidecar restarted mid-soak: its judgement of the app restarted with it, so
// it does not promote at the old soak's end; the soak starts again.
func TestGateRestartMidSoakStartsTheSoakAgain(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	keep := KeptFile{Path: filepath.Join(t.TempDir(), KeptName)}
	src := &fakeSource{}
	src.set("1")
	newGate := func() *Gate {
		return NewGate(src, store, Options{Pod: "a", Soak: 10 * time.Second, Expiry: 30 * time.Second, Clock: func() time.Time { return now }, Keep: keep, Record: "web"})
	}
	ctx := context.Background()
	g := newGate()
	g.step(ctx)
	src.set("2")
	g.step(ctx)
	require.Equal(t, "a", store.rec.First)
	now = now.Add(9 * time.Second)
	g = newGate() // restarted a second before the soak's end
	g.step(ctx)
	assert.Equal(t, "v2", string(g.Snapshot().Objects[0].Data["nginx.conf"]), "it keeps the content under trial")
	assert.Equal(t, now, store.rec.Since, "its soak starts again")
	now = now.Add(2 * time.Second)
	g.step(ctx)
	assert.Equal(t, Soaking, store.rec.State, "not promoted at the old soak's end")
	now = now.Add(8 * time.Second)
	g.step(ctx)
	assert.Equal(t, Promoted, store.rec.State, "promoted after a whole soak of its own")
}

// A state kept for other sources (the pod's flags changed) is not resumed.
func TestGateIgnoresAStateForOtherSources(t *testing.T) {
	keep := KeptFile{Path: filepath.Join(t.TempDir(), KeptName)}
	src := &fakeSource{}
	src.set("1")
	old := src.Snapshot()
	require.NoError(t, keep.Save(Kept{Lease: "other", Laid: &KeptSet{ID: SnapshotID(old), Snapshot: &old}}))
	src.set("2")
	g := NewGate(src, &memStore{}, Options{Pod: "a", Soak: time.Second, Keep: keep, Record: "web"})
	g.step(context.Background())
	assert.Equal(t, "v2", string(g.Snapshot().Objects[0].Data["nginx.conf"]), "starts on what its source holds")
	assert.Equal(t, Start, g.CurrentStatus().Doing, "as a new pod does, not resumed")
}

// A pod made again with its name (a StatefulSet's, after its node was lost) finds its
// predecessor's claim: it starts on the content and soaks it again from its own start, rather
// than be promoted on its predecessor's soak a moment after it started.
func TestGateRecreatedPodSoaksItsPredecessorsClaimAgain(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	store := &memStore{}
	src := &fakeSource{}
	src.set("1")
	newGate := func() *Gate {
		return NewGate(src, store, Options{Pod: "web-0", Soak: 10 * time.Second, Expiry: 30 * time.Second, Clock: func() time.Time { return now },
			Keep: KeptFile{Path: filepath.Join(t.TempDir(), KeptName)}, Record: "web"}) // a new emptyDir each time
	}
	ctx := context.Background()
	g := newGate()
	g.step(ctx)
	src.set("2")
	g.step(ctx)
	require.Equal(t, "web-0", store.rec.First)
	now = now.Add(20 * time.Second) // the pod is lost and made again, within its claim's life
	g = newGate()
	g.step(ctx) // starts on v2
	g.step(ctx)
	assert.Equal(t, now, store.rec.Since, "its soak starts again")
	assert.Equal(t, Soaking, store.rec.State, "not promoted on its predecessor's soak")
}

// A pod restarted after it rejected a content whose rejection the record does not hold yet
// keeps the good config, and writes the rejection once it can.
func TestGateRestartKeepsAnUnrecordedRejection(t *testing.T) {
	p := newRestartable(t)
	ctx := context.Background()
	g := p.gate()
	g.step(ctx)
	p.src.set("2")
	g.step(ctx)
	p.failed, p.store.putsDown = "the app refused the reload request", true
	g.step(ctx)
	require.Equal(t, "v1", string(g.Snapshot().Objects[0].Data["nginx.conf"]))
	require.Equal(t, Soaking, p.store.rec.State)

	p.failed = ""
	g = p.gate() // restarted before the rejection could be written
	g.step(ctx)
	assert.Equal(t, "v1", string(g.Snapshot().Objects[0].Data["nginx.conf"]), "the restarted sidecar does not claim the content it rejected")
	p.store.putsDown = false
	g.step(ctx)
	assert.Equal(t, Rejected, p.store.rec.State)
	assert.Equal(t, "the app refused the reload request", p.store.rec.Reason)
}

// restartable is one pod's sidecar that a test restarts: each gate() a new process on the same
// Lease, source and kept state (the emptyDir), on a clock and an app health the test sets.
type restartable struct {
	store  *memStore
	src    *fakeSource
	keep   KeptFile
	now    time.Time
	failed string
}

func newRestartable(t *testing.T) *restartable {
	p := &restartable{store: &memStore{}, src: &fakeSource{}, keep: KeptFile{Path: filepath.Join(t.TempDir(), KeptName)},
		now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	p.src.set("1")
	return p
}

func (p *restartable) gate() *Gate {
	return NewGate(p.src, p.store, Options{Pod: "a", Soak: 10 * time.Second, Expiry: 30 * time.Second, Clock: func() time.Time { return p.now },
		Failed: func(context.Context, time.Time, *PodState) string { return p.failed }, Keep: p.keep, Record: "web"})
}
