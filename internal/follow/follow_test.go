package follow

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/configwave/configwave/internal/outcome"
)

// Each sequence of verdicts the leader sees on one workload, and what it reports at each step.
func TestTransition(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	rec := outcome.Record{Change: "configmap/a", Started: t0}
	later := outcome.Record{Change: "configmap/a", Started: t0.Add(time.Minute)}
	v := func(s outcome.State) outcome.Verdict {
		return outcome.Verdict{State: s, Change: "configmap/a", Reason: "stuck"}
	}
	type step struct {
		rec  outcome.Record
		v    outcome.State
		want Report
	}
	for _, tc := range []struct {
		name    string
		started bool // this replica wrote rec
		steps   []step
	}{
		{"first sight reports nothing, whatever it finds", false, []step{{rec, outcome.Failed, Nothing}}},
		{"a rollout this replica wrote, then done", true, []step{{rec, outcome.UpToDate, RolledOut}}},
		{"found rolling, then done", false, []step{{rec, outcome.Rolling, Nothing}, {rec, outcome.UpToDate, RolledOut}}},
		{"rolling, failed once, then recovered", false, []step{{rec, outcome.Rolling, Nothing}, {rec, outcome.Failed, Failed}, {rec, outcome.Failed, Nothing}, {rec, outcome.UpToDate, Recovered}}},
		{"up to date, then the pods roll for another reason: not wave's", false, []step{{rec, outcome.UpToDate, Nothing}, {rec, outcome.Rolling, Nothing}, {rec, outcome.Failed, Nothing}, {rec, outcome.UpToDate, Nothing}}},
		{"up to date, then a rollout another replica wrote fails", false, []step{{rec, outcome.UpToDate, Nothing}, {later, outcome.Failed, Failed}}},
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
	f.Transition("k", "deployment ns/app", rec, v(outcome.Failed)) // found failed on first sight
	assert.Equal(t, []FailedRollout{{Workload: "deployment ns/app", Change: "configmap/a", Reason: "stuck"}}, f.FailedRollouts(), "listed at /status all the same")
	f.Forget("k")
	assert.Empty(t, f.FailedRollouts())
	assert.False(t, f.IsOurs("k"))
}

// Count is what the workloads gauge shows: each workload in the state it was last judged in,
// and a forgotten one in none.
func TestCount(t *testing.T) {
	f := New()
	rec := outcome.Record{Change: "configmap/a", Started: time.Unix(1000, 0)}
	f.Transition("a", "a", rec, outcome.Verdict{State: outcome.UpToDate})
	f.Transition("b", "b", rec, outcome.Verdict{State: outcome.Failed})
	f.Transition("c", "c", rec, outcome.Verdict{State: outcome.Failed})
	f.Started("d", rec)
	f.Transition("c", "c", rec, outcome.Verdict{State: outcome.UpToDate})
	f.Forget("a")
	assert.Equal(t, 1, f.Count(outcome.UpToDate))
	assert.Equal(t, 1, f.Count(outcome.Failed))
	assert.Equal(t, 1, f.Count(outcome.Rolling))
	assert.Zero(t, f.Count(outcome.Waiting))
}

// Compact keeps what is known of each workload: the counts, what is ours and what failed.
func TestCompactKeepsWhatIsFollowed(t *testing.T) {
	f := New()
	rec := outcome.Record{Change: "configmap/a", Started: time.Unix(1000, 0)}
	f.Transition("Deployment/ns/a", "a", rec, outcome.Verdict{State: outcome.UpToDate})
	f.Started("Deployment/ns/b", rec)
	f.Transition("Deployment/ns/b", "b", rec, outcome.Verdict{State: outcome.Failed, Reason: "stuck"})
	failed := f.FailedRollouts()
	f.Compact()
	assert.Equal(t, 1, f.Count(outcome.UpToDate))
	assert.Equal(t, 1, f.Count(outcome.Failed))
	assert.True(t, f.IsOurs("Deployment/ns/b"))
	assert.Equal(t, failed, f.FailedRollouts())
	assert.Equal(t, Recovered, f.Transition("Deployment/ns/b", "b", rec, outcome.Verdict{State: outcome.UpToDate}))
}
