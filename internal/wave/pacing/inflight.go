package pacing

import (
	"cmp"
	"strings"
)

// InFlight is a cap on config rollouts under way at once (--max-rollouts-in-flight, and per
// namespace --max-rollouts-in-flight-per-namespace; 0 none), so that a change shared by 3,000
// workloads never replaces every pod of the cluster at once (Stakater Reloader #179, #220).
type InFlight struct{ Max, MaxPerNamespace int }

// On says whether any cap is set.
func (c InFlight) On() bool { return c.Max > 0 || c.MaxPerNamespace > 0 }

// Waiter is a workload whose rollout waits for the cap: its work queue key ("Kind/ns/name")
// and when it first wanted to roll.
type Waiter struct {
	Key   string
	First int64 // Unix nanoseconds: earlier rolls first
}

// MayStart decides whether key may start its rollout now: rolling is how many rollouts are
// under way in the cluster, byNamespace per namespace, and waiting are the workloads waiting
// under the cap, key among them. It may when under both caps and no workload that waited longer
// and could start now (in its namespace, for the namespace cap; anywhere, for the cluster's)
// would be passed over: first come, first served, so none waits forever, and one namespace's
// queue does not hold up another's.
func (c InFlight) MayStart(key string, rolling int, byNamespace map[string]int, waiting []Waiter) bool {
	if !c.On() {
		return true
	}
	full := func(ns string) bool { return c.MaxPerNamespace > 0 && byNamespace[ns] >= c.MaxPerNamespace }
	ns := namespaceOf(key)
	if c.Max > 0 && rolling >= c.Max || full(ns) {
		return false
	}
	me, ok := find(waiting, key)
	if !ok {
		return true
	}
	for _, w := range waiting {
		if w.Key == key || before(me, w) || full(namespaceOf(w.Key)) {
			continue // after key, or cannot start now anyway
		}
		// w waited longer and could start: it goes first where it competes for the same slot.
		if c.Max > 0 || namespaceOf(w.Key) == ns {
			return false
		}
	}
	return true
}

func before(a, b Waiter) bool {
	return cmp.Or(cmp.Compare(a.First, b.First), strings.Compare(a.Key, b.Key)) < 0
}

func find(ws []Waiter, key string) (Waiter, bool) {
	for _, w := range ws {
		if w.Key == key {
			return w, true
		}
	}
	return Waiter{}, false
}

// namespaceOf is the namespace of a work queue key "Kind/ns/name".
func namespaceOf(key string) string {
	_, rest, _ := strings.Cut(key, "/")
	ns, _, _ := strings.Cut(rest, "/")
	return ns
}
