package rollout

import (
	"testing"
	"time"

	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
)

func TestLatencyOutcome(t *testing.T) {
	for result, want := range map[string]struct{ observe, keep bool }{
		ResultRolled:    {observe: true},
		ResultHeld:      {keep: true},
		ResultRetry:     {keep: true},
		ResultError:     {keep: true},
		ResultUnchanged: {},
		ResultBaseline:  {},
		ResultMissing:   {},
		ResultIgnored:   {},
		ResultResumed:   {},
	} {
		observe, keep := latencyOutcome(result)
		assert.Equal(t, want.observe, observe, result)
		assert.Equal(t, want.keep, keep, result)
	}
}

func TestChangesPendingCountFromTheFirstChange(t *testing.T) {
	p := newChangesPending()
	t0 := time.Unix(1000, 0)
	p.note("deployment/a/web", t0)
	p.note("deployment/a/web", t0.Add(time.Second)) // a second change before the rollout
	_, ok := p.settle("deployment/a/web", ResultHeld, t0.Add(2*time.Second))
	assert.False(t, ok, "held: still to roll")
	d, ok := p.settle("deployment/a/web", ResultRolled, t0.Add(3*time.Second))
	assert.True(t, ok)
	assert.Equal(t, 3*time.Second, d, "from the first change, holds included")
	_, ok = p.settle("deployment/a/web", ResultRolled, t0.Add(4*time.Second))
	assert.False(t, ok, "counted once")
	p.note("deployment/a/other", t0)
	_, ok = p.settle("deployment/a/other", ResultUnchanged, t0)
	assert.False(t, ok)
	assert.Zero(t, p.len(), "nothing kept once settled")
}

// testMetrics registers wave's series in a registry of their own, with empty gauges.
func testMetrics() *Metrics {
	zero := func() float64 { return 0 }
	return NewMetrics(prometheus.NewRegistry(), zero, zero, func(rolloutrecord.State) float64 { return 0 })
}
