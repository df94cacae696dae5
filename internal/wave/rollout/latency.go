package rollout

import (
	"sync"
	"time"
)

// changesPending keeps, per workload, when the first config change that has not rolled it yet
// reached wave, for the trigger latency: from the watch event to the rollout written, holds
// (--coalesce, a floor, --update-rate) and retries included. Only the leader notes changes, so
// a standby that takes over does not count the time it stood by.
type changesPending struct {
	mu    sync.Mutex
	since map[string]time.Time
}

func newChangesPending() *changesPending {
	return &changesPending{since: map[string]time.Time{}}
}

// note records that a change reached key at at, unless an earlier one is still pending.
func (p *changesPending) note(key string, at time.Time) {
	p.mu.Lock()
	if _, ok := p.since[key]; !ok {
		p.since[key] = at
	}
	p.mu.Unlock()
}

// settle applies a reconcile's result to key's pending change, and returns the latency to
// observe, if any.
func (p *changesPending) settle(key, result string, now time.Time) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.since[key]
	if !ok {
		return 0, false
	}
	observe, keep := latencyOutcome(result)
	if !keep {
		delete(p.since, key)
	}
	if !observe {
		return 0, false
	}
	return now.Sub(at), true
}

func (p *changesPending) drop(key string) {
	p.mu.Lock()
	delete(p.since, key)
	p.mu.Unlock()
}

func (p *changesPending) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.since)
}

// latencyOutcome says what a reconcile's result means for the change pending on a workload:
// a rollout ends it and is counted; a hold, a retry or an error leaves it pending, since the
// rollout is still to come; anything else (no key the pods see changed, config missing, the
// workload gone) ends it with nothing rolled, so nothing is counted.
func latencyOutcome(result string) (observe, keep bool) {
	switch result {
	case ResultRolled:
		return true, false
	case ResultHeld, ResultRetry, ResultError:
		return false, true
	}
	return false, false
}
