// Package pacing holds config rollouts back: for --coalesce after the first change of a quiet
// workload, until the workload's floor between rollouts (--min-rollout-interval, its
// annotation, Stakater Reloader's pause-period), and, under a cluster-wide --update-rate, until
// its turn. HoldFor is the pure rule; Pacer keeps what it needs across looks.
//
//	p := pacing.New(200*time.Millisecond, 0, pacing.StakaterPausePeriod)
//	d, why := pacing.HoldFor(now, p.WantedSince(key), lastStarted, pacing.Hold{...})
package pacing

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/configwave/configwave/internal/wave/podrefs"
)

// Annotations that pace a workload's rollouts.
const (
	// MinRolloutIntervalAnnotation (workload metadata): at least this long between two
	// rollouts wave causes; changes in the meantime roll together when it ends.
	MinRolloutIntervalAnnotation = "configwave.io/min-rollout-interval"
	// StakaterPausePeriod is Stakater Reloader's, under its default name: a change waits this
	// long, and every change meanwhile rolls with it, once, at the end (Reloader pauses the
	// Deployment at the change and resumes it at the end; wave holds the rollout, same
	// effect). --pause-deployment-annotation renames it (Pacer.PausePeriod).
	StakaterPausePeriod = podrefs.StakaterPausePeriod
)

// Pacer holds rollouts back: for --coalesce after the first change of a quiet workload, so
// that a ConfigMap and a Secret changed together roll once; and until the workload's floor
// between rollouts (--min-rollout-interval, its annotation, Reloader's pause-period) has
// passed, so that a runaway writer cannot roll a workload thousands of times; and, with a
// cluster-wide limit (--update-rate), until the workload's turn, so that a ConfigMap shared by
// every workload does not restart the whole cluster at once. A held change is never lost: the
// workload is looked at again when the wait ends, and rolls with everything that changed
// meanwhile.
type Pacer struct {
	coalesce, floor time.Duration
	limit           *rate.Limiter // nil: no cluster-wide limit
	pausePeriod     string        // Reloader's pause-period annotation, under its configured name

	mu      sync.Mutex
	pending map[string]time.Time // workload key -> when a rollout was first wanted
	// turns are the reservations of workloads under the cluster-wide limit: a turn is reserved
	// once, so waiting workloads roll first come, first served.
	turns map[string]*rate.Reservation
}

// New paces with --coalesce, --min-rollout-interval and Reloader's pause-period under the
// name pausePeriod.
func New(coalesce, floor time.Duration, pausePeriod string) *Pacer {
	return &Pacer{coalesce: coalesce, floor: floor, pausePeriod: pausePeriod, pending: map[string]time.Time{}, turns: map[string]*rate.Reservation{}}
}

// LimitRate caps rollouts across all workloads at perSecond, with bursts of burst; perSecond 0
// leaves them unlimited.
func (p *Pacer) LimitRate(perSecond float64, burst int) {
	if perSecond > 0 {
		p.limit = rate.NewLimiter(rate.Limit(perSecond), max(burst, 1))
	}
}

// WantedSince is when a rollout of key was first held; zero when none is.
func (p *Pacer) WantedSince(key string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending[key]
}

// Want notes that a rollout of key, first wanted at first, is held.
func (p *Pacer) Want(key string, first time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.pending[key]; !ok {
		p.pending[key] = first
	}
}

// WantedBefore notes that a rollout of key was wanted since at (or earlier): a pause that
// began before wave saw the change, such as one Stakater Reloader started.
func (p *Pacer) WantedBefore(key string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if first, ok := p.pending[key]; !ok || at.Before(first) {
		p.pending[key] = at
	}
}

// Turn returns how long key waits for its turn under the cluster-wide limit.
func (p *Pacer) Turn(key string, now time.Time) time.Duration {
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

// Rolled forgets the wait of a workload that rolled: its turn is used.
func (p *Pacer) Rolled(key string) {
	p.mu.Lock()
	delete(p.pending, key)
	delete(p.turns, key)
	p.mu.Unlock()
}

// Abandon forgets the wait of a workload that no longer needs to roll (its config is back as
// its pods run it, or it is gone). A turn that has not come yet goes back to the limiter, so
// the workloads behind it do not wait for a rollout that never happens.
func (p *Pacer) Abandon(key string, now time.Time) {
	p.mu.Lock()
	if r, ok := p.turns[key]; ok {
		r.CancelAt(now)
	}
	delete(p.pending, key)
	delete(p.turns, key)
	p.mu.Unlock()
}

// Held is how many workloads wait for a rollout, for the gauge.
func (p *Pacer) Held() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return float64(len(p.pending))
}

// FloorOf is a workload's floor between rollouts, from its annotations: the longest of
// --min-rollout-interval, its own annotation and Reloader's pause-period.
func (p *Pacer) FloorOf(annotations map[string]string) (time.Duration, string) {
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

// Hold is what holds a rollout back that HoldFor decides (the cluster-wide --update-rate is
// Turn's: taking a turn is a write to shared state).
type Hold struct {
	Coalesce    time.Duration
	FirstWanted time.Time // when a rollout was first held; zero when none is
	Floor       time.Duration
	FloorSource string // the flag or annotation Floor comes from
	// PauseFirst: Floor is Stakater Reloader's pause-period, which Reloader applies first: it
	// pauses the Deployment at the change and resumes it when the period ends, so every change
	// within the period rolls once, at its end.
	PauseFirst bool
	// PausedSince is when Reloader paused the Deployment (its paused-at annotation), when it
	// did: its period began then, not when wave first saw a change.
	PausedSince time.Time
}

// HoldFor is how long a wanted rollout waits, and why: for --coalesce after it was first
// wanted, so that a ConfigMap and a Secret changed together roll once; and until the floor
// between rollouts has passed since the last one wave started, or, for Reloader's
// pause-period, since the change was first wanted. 0 rolls now.
func HoldFor(now, firstWanted, lastStarted time.Time, p Hold) (time.Duration, string) {
	if d := firstWanted.Add(p.Coalesce).Sub(now); p.Coalesce > 0 && d > 0 {
		return d, fmt.Sprintf("coalescing changes for %s (--coalesce)", p.Coalesce)
	}
	if p.PauseFirst && p.Floor > 0 {
		if !p.PausedSince.IsZero() && p.PausedSince.Before(firstWanted) {
			firstWanted = p.PausedSince
		}
		if d := firstWanted.Add(p.Floor).Sub(now); d > 0 {
			return d, fmt.Sprintf("paused for %s from the first change, then one rollout (%s, as Stakater Reloader pauses the Deployment)", p.Floor, p.FloorSource)
		}
		return 0, ""
	}
	if p.Floor > 0 && !lastStarted.IsZero() {
		// Started is read from an annotation anyone with write access can edit: a time in the
		// future counts as now, so that the hold is at most the floor, never until then.
		if lastStarted.After(now) {
			lastStarted = now
		}
		if d := lastStarted.Add(p.Floor).Sub(now); d > 0 {
			return d, fmt.Sprintf("at most one rollout every %s (%s)", p.Floor, p.FloorSource)
		}
	}
	return 0, ""
}

// Coalesce is --coalesce.
func (p *Pacer) Coalesce() time.Duration { return p.coalesce }

// PausePeriod is the name of Reloader's pause-period annotation, as configured.
func (p *Pacer) PausePeriod() string { return p.pausePeriod }
