package pacing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHoldFor(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	p := New(0, time.Minute, StakaterPausePeriod)
	floor := func(annotations map[string]string) Hold {
		d, source := p.FloorOf(annotations)
		return Hold{Floor: d, FloorSource: source, PauseFirst: source == p.PausePeriod()}
	}
	coalesce := Hold{Coalesce: 200 * time.Millisecond}
	pausedSince := func(h Hold, at time.Time) Hold { h.PausedSince = at; return h }
	tests := []struct {
		name                    string
		now, first, lastStarted time.Time
		pace                    Hold
		want                    time.Duration
		why                     string
	}{
		{name: "the first change of a quiet workload waits for the others", now: t0, first: t0, pace: coalesce, want: 200 * time.Millisecond, why: "--coalesce"},
		{name: "a later change does not push the wait out", now: t0.Add(50 * time.Millisecond), first: t0, pace: coalesce, want: 150 * time.Millisecond, why: "--coalesce"},
		{name: "coalescing over", now: t0.Add(200 * time.Millisecond), first: t0, pace: coalesce},
		{name: "the floor from the last rollout", now: t0.Add(20 * time.Second), first: t0, lastStarted: t0, pace: floor(nil), want: 40 * time.Second, why: "--min-rollout-interval"},
		{name: "never rolled by wave: no floor", now: t0, first: t0, pace: floor(nil)},
		{name: "the workload's own floor raises it", now: t0.Add(time.Minute), first: t0, lastStarted: t0,
			pace: floor(map[string]string{MinRolloutIntervalAnnotation: "5m"}), want: 4 * time.Minute, why: MinRolloutIntervalAnnotation},
		{name: "the longest applies", now: t0.Add(time.Minute), first: t0, lastStarted: t0,
			pace: floor(map[string]string{StakaterPausePeriod: "10m", MinRolloutIntervalAnnotation: "5m"}), want: 9 * time.Minute, why: StakaterPausePeriod},
		{name: "never below --min-rollout-interval", now: t0.Add(20 * time.Second), first: t0, lastStarted: t0,
			pace: floor(map[string]string{MinRolloutIntervalAnnotation: "10s"}), want: 40 * time.Second, why: "--min-rollout-interval"},
		{name: "a last rollout in the future (the record is user-editable) counts as now: held for the floor, not until then", now: t0, first: t0,
			lastStarted: t0.Add(10 * 365 * 24 * time.Hour), pace: floor(nil), want: time.Minute, why: "--min-rollout-interval"},
		{name: "Reloader's pause-period pauses at the first change of a quiet workload, never rolled before", now: t0, first: t0,
			pace: floor(map[string]string{StakaterPausePeriod: "5m"}), want: 5 * time.Minute, why: "as Stakater Reloader pauses"},
		{name: "a second change 30 s into the pause rolls with the first, at the end", now: t0.Add(30 * time.Second), first: t0, lastStarted: t0.Add(-time.Hour),
			pace: floor(map[string]string{StakaterPausePeriod: "5m"}), want: 270 * time.Second, why: StakaterPausePeriod},
		{name: "the pause over: one rollout", now: t0.Add(5 * time.Minute), first: t0, pace: floor(map[string]string{StakaterPausePeriod: "5m"})},
		{name: "Reloader paused it before wave saw the change: the period runs from its paused-at", now: t0, first: t0,
			pace: pausedSince(floor(map[string]string{StakaterPausePeriod: "5m"}), t0.Add(-4*time.Minute)), want: time.Minute, why: StakaterPausePeriod},
		{name: "a paused-at after the first change does not push the end out", now: t0, first: t0,
			pace: pausedSince(floor(map[string]string{StakaterPausePeriod: "5m"}), t0.Add(time.Minute)), want: 5 * time.Minute, why: StakaterPausePeriod},
		{name: "a floor annotation that is not a duration is not applied", now: t0.Add(20 * time.Second), first: t0, lastStarted: t0,
			pace: floor(map[string]string{MinRolloutIntervalAnnotation: "soon"}), want: 40 * time.Second, why: "--min-rollout-interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, why := HoldFor(tt.now, tt.first, tt.lastStarted, tt.pace)
			assert.Equal(t, tt.want, d)
			if tt.why == "" {
				assert.Empty(t, why)
			} else {
				assert.Contains(t, why, tt.why)
			}
		})
	}
}

func TestPacerRemembersHeldRollouts(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	p := New(200*time.Millisecond, 0, StakaterPausePeriod)
	assert.True(t, p.WantedSince("Deployment/ns/app").IsZero())
	p.Want("Deployment/ns/app", t0)
	p.Want("Deployment/ns/app", t0.Add(time.Second))
	assert.Equal(t, t0, p.WantedSince("Deployment/ns/app"), "held again: it keeps the time first wanted")
	assert.Equal(t, 1.0, p.Held())
	p.Rolled("Deployment/ns/app")
	assert.Zero(t, p.Held())

	p.Want("Deployment/ns/app", t0)
	p.WantedBefore("Deployment/ns/app", t0.Add(time.Hour))
	assert.Equal(t, t0, p.WantedSince("Deployment/ns/app"), "a later time changes nothing")
	p.WantedBefore("Deployment/ns/app", t0.Add(-time.Hour))
	assert.Equal(t, t0.Add(-time.Hour), p.WantedSince("Deployment/ns/app"), "an earlier pause moves it back")
}

func TestParseInterval(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 0, "30s": 30 * time.Second, " 5m ": 5 * time.Minute, "24h": 24 * time.Hour} {
		got, err := ParseInterval(v)
		require.NoError(t, err, v)
		assert.Equal(t, want, got, v)
	}
	for _, v := range []string{"5", "-1m", "0s", "25h", "soon"} {
		_, err := ParseInterval(v)
		assert.Error(t, err, v)
	}
}

func TestPacerClusterWideRate(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	p := New(0, 0, StakaterPausePeriod)
	p.LimitRate(2, 1) // one rollout every 500 ms
	var waits []time.Duration
	for _, name := range []string{"a", "b", "c"} {
		waits = append(waits, p.Turn("Deployment/ns/"+name, t0))
		p.Want("Deployment/ns/"+name, t0)
	}
	assert.Equal(t, []time.Duration{0, 500 * time.Millisecond, time.Second}, waits, "first come, first served")
	d := p.Turn("Deployment/ns/c", t0.Add(400*time.Millisecond))
	assert.Equal(t, 600*time.Millisecond, d, "a workload looked at again keeps its turn, not a new one")
	d = p.Turn("Deployment/ns/b", t0.Add(500*time.Millisecond))
	assert.Zero(t, d, "its turn has come")
	p.Rolled("Deployment/ns/b")
	assert.Equal(t, 2.0, p.Held(), "a and c still wait to be marked rolled")

	// A workload that gives up its turn (its config changed back, or it was deleted) gives the
	// turn back: the workloads behind it do not wait for a rollout that never happens.
	p = New(0, 0, StakaterPausePeriod)
	p.LimitRate(1.0/60, 1) // one rollout a minute
	assert.Zero(t, p.Turn("Deployment/ns/a", t0))
	p.Rolled("Deployment/ns/a")
	assert.Equal(t, time.Minute, p.Turn("Deployment/ns/b", t0))
	p.Abandon("Deployment/ns/b", t0.Add(time.Second))
	assert.InDelta(t, time.Minute-2*time.Second, p.Turn("Deployment/ns/c", t0.Add(2*time.Second)), float64(time.Millisecond), "b's turn went to c (give or take the limiter's float arithmetic)")
	p.Abandon("Deployment/ns/c", t0.Add(time.Minute+time.Second)) // after its turn came: the slot was used up
	assert.InDelta(t, time.Minute-time.Second, p.Turn("Deployment/ns/d", t0.Add(time.Minute+time.Second)), float64(time.Millisecond))

	p = New(0, 0, StakaterPausePeriod)
	p.LimitRate(0, 1)
	for i := range 100 {
		d := p.Turn("Deployment/ns/"+string(rune('a'+i%26))+"x", t0)
		require.Zero(t, d, "no limit by default")
	}
}
