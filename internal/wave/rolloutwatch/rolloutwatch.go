// Package rolloutwatch keeps what the leader knows of the config rollouts it follows: which ones
// are wave's (the pods roll for a config change), what was last judged of each, and which
// failed, and turns each change of verdict into what to report. The controller does the
// reporting (Events, metrics, alerts); a failover reports nothing twice.
package rolloutwatch

import (
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/slimcache"
)

// Tracker turns changes of a workload's rolloutrecord.Verdict into Events, the rollouts metric and
// alerts. Only changes it sees happen are reported: a replica that becomes the leader takes
// the verdicts it finds as they are, so a failover never repeats an Event; what it finds
// failed it lists at /status all the same. Only config rollouts are reported: when the pods of
// an up-to-date workload roll again without a new rollout record (someone changed the
// image), that is not wave's to judge.
type Tracker struct {
	mu     sync.Mutex
	seen   map[string]followed      // workload key -> what was last judged
	failed map[string]FailedRollout // workload key -> the failure, until the workload is up to date
}

type followed struct {
	state   rolloutrecord.State
	started time.Time // the rollout record judged
	ours    bool      // the pods roll for that config change
}

// FailedRollout is one entry of /status.
type FailedRollout struct {
	Workload string    `json:"workload"`
	Change   string    `json:"change"`
	Since    time.Time `json:"since"`
	Reason   string    `json:"reason"`
}

// New starts with nothing followed.
func New() *Tracker {
	return &Tracker{seen: map[string]followed{}, failed: map[string]FailedRollout{}}
}

// Started notes a rollout this replica just wrote, so that its completion is reported even if
// the informer delivers the finished workload without a rolling one in between.
func (f *Tracker) Started(key string, rec rolloutrecord.Record) {
	f.mu.Lock()
	f.seen[key] = followed{state: rolloutrecord.Rolling, started: rec.Started, ours: true}
	f.mu.Unlock()
}

// IsOurs reports whether the pods of key roll for a config change.
func (f *Tracker) IsOurs(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[key].ours
}

// Forget drops what is known of key.
func (f *Tracker) Forget(key string) {
	f.mu.Lock()
	delete(f.seen, key)
	delete(f.failed, key)
	f.mu.Unlock()
}

// Report is what a transition means.
type Report int

const (
	Nothing Report = iota
	RolledOut
	Recovered // rolled out after a failure
	Failed
)

// Transition records the verdict v on the rollout record rec of the workload key (name is how
// /status names it) and says what to report.
func (f *Tracker) Transition(key, name string, rec rolloutrecord.Record, v rolloutrecord.Verdict) Report {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev, seen := f.seen[key]
	if seen && rec.Started.Before(prev.started) {
		// The workload as a cache a moment behind has it, from before the rollout followed
		// was written (a kind wave may list but not watch is listed again only on a config
		// change or a minute later): it says nothing of that rollout.
		return Nothing
	}
	cur := followed{state: v.State, started: rec.Started, ours: prev.ours}
	switch {
	case !seen:
		cur.ours = v.State == rolloutrecord.Rolling || v.State == rolloutrecord.Failed // found under way: take it as the config's
	case !rec.Started.Equal(prev.started):
		cur.ours = true // a rollout another replica wrote
	case prev.state == rolloutrecord.UpToDate && v.State != rolloutrecord.UpToDate:
		cur.ours = false // the pods roll for another reason than config
	}
	f.seen[key] = cur
	_, hadFailed := f.failed[key]
	switch {
	case v.State == rolloutrecord.Failed && cur.ours:
		f.failed[key] = FailedRollout{Workload: name, Change: v.Change, Since: v.Since, Reason: v.Reason}
	case v.State == rolloutrecord.UpToDate:
		delete(f.failed, key)
	}
	if !seen || prev.state == v.State || !cur.ours && !hadFailed {
		return Nothing
	}
	switch {
	case v.State == rolloutrecord.Failed:
		return Failed
	case v.State == rolloutrecord.UpToDate && hadFailed:
		return Recovered
	case v.State == rolloutrecord.UpToDate && prev.ours && prev.state == rolloutrecord.Rolling:
		return RolledOut
	}
	return Nothing
}

// Compact copies what is followed into maps made now, their keys into one string. Call it
// after the first pass over every workload: the keys came from the informers' initial lists
// and the maps grew with that pass, each key holding a span of the heap the pass left.
func (f *Tracker) Compact() {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := make([]string, 0, len(f.seen))
	var b slimcache.StringPacker
	for key := range f.seen {
		keys = append(keys, key)
		b.Add(key)
	}
	copies := b.Strings()
	seen := make(map[string]followed, len(keys))
	for i, key := range keys {
		seen[copies[i]] = f.seen[key]
	}
	f.seen = seen
	f.failed = maps.Clone(f.failed) // few: only its table is new
}

// Count is how many of the workloads followed were last judged to be in state s.
func (f *Tracker) Count(s rolloutrecord.State) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, w := range f.seen {
		if w.state == s {
			n++
		}
	}
	return n
}

// OursRolling is how many config rollouts are under way (the pods roll for a config change, not
// for an image bump), by namespace, and whether key's is one of them.
func (f *Tracker) OursRolling(key string) (byNamespace map[string]int, total int, self bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	byNamespace = map[string]int{}
	for k, w := range f.seen {
		if w.state != rolloutrecord.Rolling || !w.ours {
			continue
		}
		_, rest, _ := strings.Cut(k, "/")
		ns, _, _ := strings.Cut(rest, "/")
		byNamespace[ns]++
		total++
		self = self || k == key
	}
	return byNamespace, total, self
}

// FailedRollouts lists the workloads whose last config rollout failed, for /status.
func (f *Tracker) FailedRollouts() []FailedRollout {
	f.mu.Lock()
	out := make([]FailedRollout, 0, len(f.failed))
	for _, r := range f.failed {
		out = append(out, r)
	}
	f.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Workload < out[j].Workload })
	return out
}
