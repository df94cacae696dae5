package rollout

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/configwave/configwave/internal/refs"
)

// Annotations that pace a workload's rollouts.
const (
	// MinRolloutIntervalAnnotation (workload metadata): at least this long between two
	// rollouts wave causes; changes in the meantime roll together when it ends.
	MinRolloutIntervalAnnotation = "configwave.io/min-rollout-interval"
	// StakaterPausePeriod is Stakater Reloader's, under its default name: after a rollout,
	// further changes wait this long (Reloader pauses the Deployment; wave holds the next
	// rollout, same effect). --pause-deployment-annotation renames it (pacer.pausePeriod).
	StakaterPausePeriod = refs.StakaterPausePeriod
)

// pacer holds rollouts back: for --coalesce after the first change of a quiet workload, so
// that a ConfigMap and a Secret changed together roll once; and until the workload's floor
// between rollouts (--min-rollout-interval, its annotation, Reloader's pause-period) has
// passed, so that a runaway writer cannot roll a workload thousands of times; and, with a
// cluster-wide limit (--update-rate), until the workload's turn, so that a ConfigMap shared by
// every workload does not restart the whole cluster at once. A held change is never lost: the
// workload is looked at again when the wait ends, and rolls with everything that changed
// meanwhile.
type pacer struct {
	coalesce, floor time.Duration
	limit           *rate.Limiter // nil: no cluster-wide limit
	pausePeriod     string        // Reloader's pause-period annotation, under its configured name

	mu      sync.Mutex
	pending map[string]time.Time // workload key -> when a rollout was first wanted
	// turns are the reservations of workloads under the cluster-wide limit: a turn is reserved
	// once, so waiting workloads roll first come, first served.
	turns map[string]*rate.Reservation
}

// newPacer paces with --coalesce, --min-rollout-interval and Reloader's pause-period under the
// name pausePeriod.
func newPacer(coalesce, floor time.Duration, pausePeriod string) *pacer {
	return &pacer{coalesce: coalesce, floor: floor, pausePeriod: pausePeriod, pending: map[string]time.Time{}, turns: map[string]*rate.Reservation{}}
}

// limitRate caps rollouts across all workloads at perSecond, with bursts of burst; perSecond 0
// leaves them unlimited.
func (p *pacer) limitRate(perSecond float64, burst int) {
	if perSecond > 0 {
		p.limit = rate.NewLimiter(rate.Limit(perSecond), max(burst, 1))
	}
}

// wantedSince is when a rollout of key was first held; zero when none is.
func (p *pacer) wantedSince(key string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending[key]
}

// want notes that a rollout of key, first wanted at first, is held.
func (p *pacer) want(key string, first time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.pending[key]; !ok {
		p.pending[key] = first
	}
}

// turn returns how long key waits for its turn under the cluster-wide limit.
func (p *pacer) turn(key string, now time.Time) time.Duration {
	if p.limit == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.turns[key]
	if !ok {
		r = p.limit.ReserveN(now, 1)
		p.turns[key] = r
	}
	return r.DelayFrom(now)
}

// rolled forgets the wait of a workload that rolled: its turn is used.
func (p *pacer) rolled(key string) {
	p.mu.Lock()
	delete(p.pending, key)
	delete(p.turns, key)
	p.mu.Unlock()
}

// abandon forgets the wait of a workload that no longer needs to roll (its config is back as
// its pods run it, or it is gone). A turn that has not come yet goes back to the limiter, so
// the workloads behind it do not wait for a rollout that never happens.
func (p *pacer) abandon(key string, now time.Time) {
	p.mu.Lock()
	if r, ok := p.turns[key]; ok {
		r.CancelAt(now)
	}
	delete(p.pending, key)
	delete(p.turns, key)
	p.mu.Unlock()
}

// Held is how many workloads wait for a rollout, for the gauge.
func (p *pacer) Held() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return float64(len(p.pending))
}

// floorOf is a workload's floor between rollouts, from its annotations: the longest of
// --min-rollout-interval, its own annotation and Reloader's pause-period.
func (p *pacer) floorOf(annotations map[string]string) (time.Duration, string) {
	floor, source := p.floor, "--min-rollout-interval"
	for _, a := range []string{MinRolloutIntervalAnnotation, p.pausePeriod} {
		if d, err := ParseInterval(annotations[a]); err == nil && d > floor {
			floor, source = d, a
		}
	}
	return floor, source
}

// maxInterval bounds a floor: beyond a day, a workload would effectively never roll again.
const maxInterval = 24 * time.Hour

// ParseInterval reads a floor annotation: a positive Go duration ("30s", "5m") up to 24h.
// "" is no floor.
func ParseInterval(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%q is not a duration such as 30s or 5m", v)
	case d <= 0 || d > maxInterval:
		return 0, fmt.Errorf("%q is not between 0 and %s", v, maxInterval)
	}
	return d, nil
}
