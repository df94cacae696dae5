package reload

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/reloader/source"
	"github.com/configwave/configwave/internal/reloader/unpack"
)

// The state table: one pass's outcome moves the loop's state in one step.
func TestStateNext(t *testing.T) {
	t0 := time.Unix(1000, 0)
	live := state{unpacked: true, liveHash: "A", result: ResultSuccess, since: t0}
	tests := []struct {
		name string
		from state
		o    outcome
		want state
	}{
		{"first unpack", state{}, outcome{hash: "A", swapped: true, first: true},
			state{unpacked: true, liveHash: "A"}},
		{"first unpack over a set a previous reloader left: the app is due", state{}, outcome{hash: "B", swapped: true, first: true, tellOnStart: true},
			state{unpacked: true, liveHash: "B", notifyDue: true}},
		{"first unpack, same set already on disk: nothing due", state{}, outcome{hash: "A", first: true},
			state{unpacked: true, liveHash: "A"}},
		{"change told", live, outcome{hash: "B", swapped: true, notified: true},
			state{unpacked: true, liveHash: "B", result: ResultSuccess, since: t0}},
		{"change live, app not told: due, failing since now", live,
			outcome{hash: "B", swapped: true, notifyErr: errors.New("503")},
			state{unpacked: true, liveHash: "B", notifyDue: true, result: ResultNotifyFailed, lastError: "503", since: t0.Add(time.Minute), failingSince: t0.Add(time.Minute), notifyError: "503"}},
		{"due stays due through a missing source", state{unpacked: true, liveHash: "B", notifyDue: true, result: ResultNotifyFailed, since: t0, failingSince: t0},
			outcome{missing: "configmap web/app", notifyErr: errors.New("503")},
			state{unpacked: true, liveHash: "B", notifyDue: true, result: ResultNotifyFailed, lastError: "503", since: t0, failingSince: t0, waitingFor: "configmap web/app", notifyError: "503"}},
		{"due stays due through a rejected set, and both are kept", state{unpacked: true, liveHash: "B", notifyDue: true, result: ResultNotifyFailed, since: t0, failingSince: t0},
			outcome{hash: "C", result: ResultValidationFailed, err: errors.New("rejected"), notifyErr: errors.New("503")},
			state{unpacked: true, liveHash: "B", notifyDue: true, rejected: "C", result: ResultValidationFailed, lastError: "rejected", since: t0.Add(time.Minute), failingSince: t0, notifyError: "503"}},
		{"the due set told while the newest is still rejected: still a failure", state{unpacked: true, liveHash: "B", notifyDue: true, rejected: "C", result: ResultValidationFailed, lastError: "rejected", since: t0, failingSince: t0, notifyError: "503"},
			outcome{hash: "C", notified: true},
			state{unpacked: true, liveHash: "B", rejected: "C", result: ResultValidationFailed, lastError: "rejected", since: t0}},
		{"the due set told while its source is gone", state{unpacked: true, liveHash: "B", notifyDue: true, result: ResultNotifyFailed, since: t0, failingSince: t0, notifyError: "503"},
			outcome{missing: "configmap web/app", notified: true},
			state{unpacked: true, liveHash: "B", result: ResultSuccess, since: t0.Add(time.Minute), waitingFor: "configmap web/app"}},
		{"a restart whose first set is rejected, over the good set its predecessor made live: ready", state{},
			outcome{hash: "C", result: ResultValidationFailed, err: errors.New("rejected"), liveKept: true},
			state{unpacked: true, rejected: "C", result: ResultValidationFailed, lastError: "rejected", since: t0.Add(time.Minute)}},
		{"a first set rejected with nothing live: not ready", state{},
			outcome{hash: "C", result: ResultValidationFailed, err: errors.New("rejected")},
			state{rejected: "C", result: ResultValidationFailed, lastError: "rejected", since: t0.Add(time.Minute)}},
		{"rejected stays ready and keeps the live hash", live, outcome{hash: "C", result: ResultValidationFailed, err: errors.New("rejected")},
			state{unpacked: true, liveHash: "A", rejected: "C", result: ResultValidationFailed, lastError: "rejected", since: t0.Add(time.Minute)}},
		{"sources back to the live set after a rejection: all is well", state{unpacked: true, liveHash: "A", rejected: "C", result: ResultValidationFailed, lastError: "x", since: t0},
			outcome{hash: "A"},
			state{unpacked: true, liveHash: "A", result: ResultSuccess, since: t0.Add(time.Minute)}},
		{"write failed before the swap: nothing due", live, outcome{hash: "B", result: ResultWriteFailed, err: errors.New("ENOSPC"), retry: true},
			state{unpacked: true, liveHash: "A", result: ResultWriteFailed, lastError: "ENOSPC", since: t0.Add(time.Minute)}},
		{"no app to tell: a set live after a failure clears it, and nothing is due", state{unpacked: true, liveHash: "A", result: ResultInvalidConfig, lastError: "clash", since: t0},
			outcome{hash: "B", swapped: true, nobody: true},
			state{unpacked: true, liveHash: "B", result: ResultSuccess, since: t0.Add(time.Minute)}},
		{"write failed after the swap and the app was told", live, outcome{hash: "B", swapped: true, notified: true, result: ResultWriteFailed, err: errors.New("link")},
			state{unpacked: true, liveHash: "B", result: ResultWriteFailed, lastError: "link", since: t0.Add(time.Minute)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.from.next(tt.o, t0.Add(time.Minute)))
		})
	}
}

// kubelet restarts a sidecar while the app and the emptyDir stay: the app is told once if the
// restarted reloader's set differs from the one on disk, and not at all if it is the same.
func TestReloaderRestartTellsTheAppOnlyWhenTheSetChanged(t *testing.T) {
	root := t.TempDir()
	layout := Layout{ConfigMapMode: 0o644, SecretMode: 0o600}
	first, _, err := layout.Files([]source.Object{cm("web", "app", "app.yaml", "v1")})
	require.NoError(t, err)
	_, err = unpack.New(root).Write(first)
	require.NoError(t, err)

	for _, tt := range []struct {
		data  string
		calls int32
	}{{"v1", 0}, {"v2", 1}, {"v2", 0}} {
		n := &countingNotifier{}
		r := &Reloader{Source: newFakeSource(cm("web", "app", "app.yaml", tt.data)), Writer: unpack.New(root), Layout: layout, Notifier: n}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		require.Eventually(t, r.Ready, wait, tick)
		if tt.calls > 0 {
			require.Eventually(t, func() bool { return n.calls.Load() == tt.calls }, wait, tick)
		}
		time.Sleep(100 * time.Millisecond)
		cancel()
		require.NoError(t, <-done)
		assert.Equal(t, tt.calls, n.calls.Load(), "restart with %s on disk", tt.data)
		assert.True(t, fileIs(root, "app.yaml", tt.data)())
	}
}

// Once a set is live the app is told, whatever the passes after it meet: a deleted source, a
// clash, a rejected set. Today's test: the app refuses, then the source goes, then a bad set
// comes, then the app answers: it is told, and the live set is the last good one.
func TestReloaderLiveSetIsToldWhateverComesNext(t *testing.T) {
	src := newFakeSource(cm("web", "app", "app.yaml", "v1"))
	n := &countingNotifier{}
	n.fail.Store(true)
	r, root := newReloader(t, src, n)
	r.Check = func(_ context.Context, dir string) error {
		if b, _ := os.ReadFile(filepath.Join(dir, "app.yaml")); string(b) == "bad" {
			return ErrRejected
		}
		return nil
	}
	start(t, r)
	require.Eventually(t, r.Ready, wait, tick)

	src.set(source.Snapshot{Objects: []source.Object{cm("web", "app", "app.yaml", "v2")}})
	require.Eventually(t, func() bool { return r.CurrentStatus().NotifyDue }, wait, tick)
	src.set(source.Snapshot{Missing: []configref.Ref{{Kind: configref.ConfigMap, Namespace: "web", Name: "app"}}})
	require.Eventually(t, func() bool { return r.CurrentStatus().Waiting != "" }, wait, tick)
	src.set(source.Snapshot{Objects: []source.Object{cm("web", "app", "app.yaml", "bad")}})
	// The rejected pass's result lasts only until the next retry (RetryInterval) reports the app's
	// refusal again; its count stays. The count comes before the pass's status is published; the
	// source no longer missing says the status is that pass's or a retry's after it.
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(r.Metrics.Reloads.WithLabelValues(ResultValidationFailed)) == 1 && r.CurrentStatus().Waiting == ""
	}, wait, tick)
	assert.True(t, r.CurrentStatus().NotifyDue, "still due after a missing source and a rejected set")
	assert.Contains(t, r.CurrentStatus().NotifyError, "503")

	n.fail.Store(false)
	require.Eventually(t, func() bool { return !r.CurrentStatus().NotifyDue }, wait, tick, "told once the app answers, with no new change")
	assert.True(t, fileIs(root, "app.yaml", "v2")())
}

// --unhealthy-after: /healthz fails once the app has kept failing to take new config that
// long; a rejected config never makes it fail.
func TestReloaderUnhealthyAfter(t *testing.T) {
	src := newFakeSource(cm("web", "app", "app.yaml", "v1"))
	n := &countingNotifier{}
	r, _ := newReloader(t, src, n)
	r.UnhealthyAfter = 300 * time.Millisecond
	r.Check = func(_ context.Context, dir string) error {
		if b, _ := os.ReadFile(filepath.Join(dir, "app.yaml")); string(b) == "bad" {
			return ErrRejected
		}
		return nil
	}
	start(t, r)
	require.Eventually(t, r.Ready, wait, tick)

	src.set(source.Snapshot{Objects: []source.Object{cm("web", "app", "app.yaml", "bad")}})
	require.Eventually(t, func() bool { return r.CurrentStatus().LastResult == ResultValidationFailed }, wait, tick)
	time.Sleep(2 * r.UnhealthyAfter)
	assert.NoError(t, r.Healthy(), "a rejected config is reported, never a reason to restart the pod")

	n.fail.Store(true)
	src.set(source.Snapshot{Objects: []source.Object{cm("web", "app", "app.yaml", "v2")}})
	require.Eventually(t, func() bool { return r.Healthy() != nil }, wait, tick)
	assert.ErrorContains(t, r.Healthy(), "--unhealthy-after=300ms")
	assert.ErrorContains(t, r.Healthy(), "503")

	n.fail.Store(false)
	require.Eventually(t, func() bool { return r.Healthy() == nil }, wait, tick, "healthy again once the app took it")
}

// The first change after a quiet period is applied at once, whatever --debounce is: with an
// hour of debounce and an hour of quiet (a moved clock), an isolated change reaches the app.
func TestReloaderIsolatedChangeIsNotDelayedByDebounce(t *testing.T) {
	src := newFakeSource(cm("web", "app", "app.yaml", "v1"))
	n := &countingNotifier{}
	r, root := newReloader(t, src, n)
	r.Debounce = time.Hour
	clk := newLoopClock(r)
	start(t, r)
	require.Eventually(t, r.Ready, wait, tick)
	clk.stepAfterPass(t, func(s Status) bool { return s.Ready }, 2*time.Hour) // an hour and more of quiet
	src.set(source.Snapshot{Objects: []source.Object{cm("web", "app", "app.yaml", "v2")}})
	require.Eventually(t, func() bool { return n.calls.Load() == 1 }, wait, tick)
	assert.True(t, fileIs(root, "app.yaml", "v2")())
}

// Unpack only (no --reload-http, no app): a valid set after an invalid one goes live and
// clears the failure; nothing stays due.
func TestReloaderWithNobodyToTell(t *testing.T) {
	src := newFakeSource(cm("web", "a", "app.yaml", "v1"))
	r, root := newReloader(t, src, nil)
	start(t, r)
	require.Eventually(t, r.Ready, wait, tick)
	src.set(source.Snapshot{Objects: []source.Object{cm("web", "a", "app.yaml", "v2"), cm("web", "b", "app.yaml", "v3")}})
	require.Eventually(t, func() bool { return r.CurrentStatus().LastResult == ResultInvalidConfig }, wait, tick)
	src.set(source.Snapshot{Objects: []source.Object{cm("web", "a", "app.yaml", "v4")}})
	require.Eventually(t, fileIs(root, "app.yaml", "v4"), wait, tick)
	require.Eventually(t, func() bool { return r.CurrentStatus().LastResult == ResultSuccess }, wait, tick)
	assert.False(t, r.CurrentStatus().NotifyDue)
	assert.EqualValues(t, 1, testutil.ToFloat64(r.Metrics.LastReloadSuccessful))
}

// The record beside the config: a restarted reloader tells the app again when the app never
// took the set on disk (its last reload failed, and kubelet restarted the sidecar for it), and
// not when it did. A garbled record (a node that crashed while it was written) says nothing of
// what the app took: the app is told again.
func TestReloaderRestartRemembersWhatTheAppTook(t *testing.T) {
	root := t.TempDir()
	record := filepath.Join(root, ToldRecordName)
	for i, tt := range []struct {
		data    string
		appFail bool
		before  func()
		calls   int32
	}{
		{data: "one", calls: 0},                // an empty volume: the app reads one as it starts
		{data: "two", appFail: true, calls: 1}, // two came while no reloader ran; the app refuses it
		{data: "two", calls: 1},                // two on disk, and the record says the app never took it
		{data: "two", calls: 0},                // now it has
		{data: "two", before: func() { require.NoError(t, os.WriteFile(record, []byte("garbage"), 0o600)) }, calls: 1},
		{data: "two", before: func() { require.NoError(t, os.WriteFile(record, nil, 0o600)) }, calls: 1}, // empty, as a crash can leave it
		{data: "three", calls: 1},
		{data: "three", calls: 0},
	} {
		if tt.before != nil {
			tt.before()
		}
		n := &countingNotifier{}
		n.fail.Store(tt.appFail)
		r := &Reloader{Source: newFakeSource(cm("web", "app", "app.yaml", tt.data)), Writer: unpack.New(root),
			Layout: Layout{ConfigMapMode: 0o644, SecretMode: 0o600}, Notifier: n, Told: &ToldRecord{Path: record}, RetryInterval: time.Hour}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		require.Eventually(t, r.Ready, wait, tick)
		if tt.calls > 0 {
			require.Eventually(t, func() bool { return n.calls.Load() >= tt.calls }, wait, tick)
		}
		time.Sleep(100 * time.Millisecond)
		cancel()
		require.NoError(t, <-done)
		assert.Equal(t, tt.calls, n.calls.Load(), "run %d with %s on disk", i, tt.data)
		b, err := os.ReadFile(record)
		require.NoError(t, err, "run %d", i)
		assert.NotContains(t, string(b), tt.data, "the record holds no value")
	}
}
