// Package brake stops rolling the workloads that use a ConfigMap or Secret that changes too
// often: a controller fighting another, a pipeline writing in a loop (Stakater Reloader #1183,
// "over 80k replicasets"; wave-k8s/wave#182). A source that changes Writes times within Within
// is braked; it is released once it has been quiet for Within. The default, 10 in a minute,
// never brakes a person's edits (each takes longer than six seconds) and brakes a machine
// writing twice a second after five seconds, well before its tenth rollout.
//
// State and its methods are the pure rule; Tracker keeps a State per source.
package brake

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/configwave/configwave/internal/kube/configref"
)

// Rule is when a source counts as flapping; the zero Rule never brakes.
type Rule struct {
	Writes int
	Within time.Duration
}

// Default is --flapping-threshold's default.
var Default = Rule{Writes: 10, Within: time.Minute}

// String is the rule as the flag takes it: "10/1m0s", or "0".
func (r Rule) String() string {
	if r.Writes == 0 {
		return "0"
	}
	return fmt.Sprintf("%d/%s", r.Writes, r.Within)
}

// ParseRule reads "WRITES/DURATION" ("10/1m"), or "0" for never.
func ParseRule(s string) (Rule, error) {
	if strings.TrimSpace(s) == "0" {
		return Rule{}, nil
	}
	n, d, ok := strings.Cut(s, "/")
	writes, err1 := strconv.Atoi(n)
	within, err2 := time.ParseDuration(d)
	if !ok || err1 != nil || err2 != nil || writes < 2 || within <= 0 || within > 24*time.Hour {
		return Rule{}, fmt.Errorf("%q: write WRITES/DURATION, at least 2 writes within at most 24h (\"10/1m\"), or 0 to never brake", s)
	}
	return Rule{Writes: writes, Within: within}, nil
}

// State is one source's recent changes: at most Writes times, newest last, and since when it
// is braked (zero: not).
type State struct {
	Changes []time.Time
	Since   time.Time
}

// Changed is s after a change at now.
func (s State) Changed(now time.Time, r Rule) State {
	if r.Writes == 0 {
		return State{}
	}
	if s.braked(now, r) {
		s.Changes = []time.Time{now} // still flapping: quiet counts from this change
		return s
	}
	s.Since = time.Time{}
	kept := []time.Time{}
	for _, t := range s.Changes {
		if now.Sub(t) < r.Within {
			kept = append(kept, t)
		}
	}
	kept = append(kept, now)
	if len(kept) >= r.Writes {
		return State{Changes: []time.Time{now}, Since: now}
	}
	return State{Changes: kept}
}

// Braked says whether the source is braked at now, and when it is released if it stays quiet.
func (s State) Braked(now time.Time, r Rule) (braked bool, quietAt time.Time) {
	if !s.braked(now, r) {
		return false, time.Time{}
	}
	return true, s.Changes[len(s.Changes)-1].Add(r.Within)
}

func (s State) braked(now time.Time, r Rule) bool {
	return !s.Since.IsZero() && len(s.Changes) > 0 && now.Sub(s.Changes[len(s.Changes)-1]) < r.Within
}

// Tracker keeps a State per source, for the controller's handlers and its looks.
type Tracker struct {
	rule    Rule
	mu      sync.Mutex
	m       map[configref.Ref]State
	sweepAt int // sweep once m is this big
}

// NewTracker brakes by rule.
func NewTracker(rule Rule) *Tracker {
	return &Tracker{rule: rule, m: map[configref.Ref]State{}, sweepAt: 1024}
}

// Changed notes a change of ref's content at now, and says whether it braked ref just now.
func (t *Tracker) Changed(ref configref.Ref, now time.Time) (brakedNow bool) {
	if t == nil || t.rule.Writes == 0 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m) >= t.sweepAt {
		t.sweep(now) // bounded by the sources that changed within the rule's duration
		t.sweepAt = max(2*len(t.m), 1024)
	}
	before := t.m[ref]
	after := before.Changed(now, t.rule)
	t.m[ref] = after
	return !after.Since.IsZero() && !after.Since.Equal(before.Since)
}

// Braked says whether ref is braked at now, and when it is released if it stays quiet.
func (t *Tracker) Braked(ref configref.Ref, now time.Time) (bool, time.Time) {
	if t == nil {
		return false, time.Time{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[ref].Braked(now, t.rule)
}

// Count is how many sources are braked at now, and forgets the quiet ones.
func (t *Tracker) Count(now time.Time) int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep(now)
	n := 0
	for _, s := range t.m {
		if braked, _ := s.Braked(now, t.rule); braked {
			n++
		}
	}
	return n
}

// sweep forgets the sources quiet for the rule's duration: they start afresh.
func (t *Tracker) sweep(now time.Time) {
	for ref, s := range t.m {
		if len(s.Changes) == 0 || now.Sub(s.Changes[len(s.Changes)-1]) >= t.rule.Within {
			delete(t.m, ref)
		}
	}
}

// Rule is the tracker's rule.
func (t *Tracker) Rule() Rule { return t.rule }
