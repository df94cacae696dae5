package rolloutwatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/configwave/configwave/internal/wave/rolloutrecord"
)

// Each sequence of verdicts the leader sees on one workload, and what it reports at each step.
func TestTransition(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	rec := rolloutrecord.Record{Change: "configmap/a", Started: t0}
	later := rolloutrecord.Record{Change: "configmap/a", Started: t0.Add(time.Minute)}
	v := func(s rolloutrecord.State) rolloutrecord.Verdict {
		return rolloutrecord.Verdict{State: s, Change: "configmap/a", Reason: "stuck"}
	}
	type step struct {
		rec  rolloutrecord.Record
		v    rolloutrecord.State
		want Report
	}
	for _, tc := range []struct {
		name    string
		started bool // this replica wrote rec
		steps   []step
	}{
		{"first sight reports nothing, whatever it finds", false, []step{{rec, rolloutrecord.Failed, Nothing}}},
		{"a rollout this replica wrote, then done", true, []step{{rec, rolloutrecord.UpToDate, RolledOut}}},
		{"found rolling, then done", false, []step{{rec, rolloutrecord.Rolling, Nothing}, {rec, rolloutrecord.UpToDate, RolledOut}}},
		{"rolling, failed once, then recovered", false, []step{{rec, rolloutrecord.Rolling, Nothing}, {rec, rolloutrecord.Failed, Failed}, {rec, rolloutrecord.Failed, Nothing}, {rec, rolloutrecord.UpToDate, Recovered}}},
		{"up to date, then the pods roll for another reason: not wave's", false, []step{{rec, rolloutrecord.UpToDate, Nothing}, {rec, rolloutrecord.Rolling, Nothing}, {rec, rolloutrecord.Failed, Nothing}, {rec, rolloutrecord.UpToDate, Nothing}}},
		{"up to date, then a rollout another replica wrote fails", false, []step{{rec, rolloutrecord.UpToDate, Nothing}, {later, rolloutrecord.Failed, Failed}}},
		{"a rollout this replica wrote, seen first on a workload from before it (a stale list): nothing, until the write shows", true,
			[]step{{rolloutrecord.Record{}, rolloutrecord.UpToDate, Nothing}, {rec, rolloutrecord.Rolling, Nothing}, {rec, rolloutrecord.UpToDate, RolledOut}}},
		{"rolling, failed, then undone by wave (held back): no recovery reported", true, []step{{rec, rolloutrecord.Rolling, Nothing}, {rec, rolloutrecord.Failed, Failed}, {rec, rolloutrecord.HeldBack, Nothing}}},
		{"an older record after a newer one tells nothing", false, []step{{later, rolloutrecord.Rolling, Nothing}, {rec, rolloutrecord.UpToDate, Nothing}, {later, rolloutrecord.UpToDate, RolledOut}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New()
			if tc.started {
				f.Started("k", rec)
			}
			for i, s := range tc.steps {
				assert.Equal(t, s.want, f.Transition("k", "deployment ns/app", s.rec, v(s.v)), "step %d (%s)", i, s.v)
			}
		})
	}

	f := New()
	f.Transition("k", "deployment ns/app", rec, v(rolloutrecord.Failed)) // found failed on first sight
	assert.Equal(t, []FailedRollout{{Workload: "deployment ns/app", Change: "configmap/a", Reason: "stuck"}}, f.FailedRollouts(), "listed at /status all the same")
	f.Forget("k")
	assert.Empty(t, f.FailedRollouts())
	assert.False(t, f.IsOurs("k"))
}

// Count is what the workloads gauge shows: each workload in the state it was last judged in,
// and a forgotten one in none.
func TestCount(t *testing.T) {
	f := New()
	rec := rolloutrecord.Record{Change: "configmap/a", Started: time.Unix(1000, 0)}
	f.Transition("a", "a", rec, rolloutrecord.Verdict{State: rolloutrecord.UpToDate})
	f.Transition("b", "b", rec, rolloutrecord.Verdict{State: rolloutrecord.Failed})
	f.Transition("c", "c", rec, rolloutrecord.Verdict{State: rolloutrecord.Failed})
	f.Started("d", rec)
	f.Transition("c", "c", rec, rolloutrecord.Verdict{State: rolloutrecord.UpToDate})
	f.Forget("a")
	assert.Equal(t, 1, f.Count(rolloutrecord.UpToDate))
	assert.Equal(t, 1, f.Count(rolloutrecord.Failed))
	assert.Equal(t, 1, f.Count(rolloutrecord.Rolling))
	assert.Zero(t, f.Count(rolloutrecord.Waiting))
}

// Compact keeps what is known of each workload: the counts, what is ours and what failed.
func TestCompactKeepsWhatIsFollowed(t *testing.T) {
	f := New()
	rec := rolloutrecord.Record{Change: "configmap/a", Started: time.Unix(1000, 0)}
	f.Transition("Deployment/ns/a", "a", rec, rolloutrecord.Verdict{State: rolloutrecord.UpToDate})
	f.Started("Deployment/ns/b", rec)
	f.Transition("Deployment/ns/b", "b", rec, rolloutrecord.Verdict{State: rolloutrecord.Failed, Reason: "stuck"})
	failed := f.FailedRollouts()
	f.Compact()
	assert.Equal(t, 1, f.Count(rolloutrecord.UpToDate))
	assert.Equal(t, 1, f.Count(rolloutrecord.Failed))
	assert.True(t, f.IsOurs("Deployment/ns/b"))
	assert.Equal(t, failed, f.FailedRollouts())
	assert.Equal(t, Recovered, f.Transition("Deployment/ns/b", "b", rec, rolloutrecord.Verdict{State: rolloutrecord.UpToDate}))
}
