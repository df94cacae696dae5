package pacing

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestInFlightMayStart(t *testing.T) {
	a := Waiter{"Deployment/shop/a", 1}
	b := Waiter{"Deployment/shop/b", 2}
	other := Waiter{"Deployment/blog/c", 0}
	shop := func(n int) map[string]int { return map[string]int{"shop": n} }
	for _, tc := range []struct {
		name    string
		cap     InFlight
		key     string
		rolling int
		byNS    map[string]int
		waiting []Waiter
		want    bool
	}{
		{"no cap", InFlight{}, b.Key, 100, shop(100), []Waiter{a, b}, true},
		{"under the cap, nobody waits", InFlight{Max: 2}, a.Key, 1, shop(1), nil, true},
		{"at the cap", InFlight{Max: 2}, a.Key, 2, nil, []Waiter{a}, false},
		{"a slot free, the one that waited longer first", InFlight{Max: 2}, b.Key, 1, shop(1), []Waiter{a, b}, false},
		{"a slot free, the longest waiting takes it", InFlight{Max: 2}, a.Key, 1, shop(1), []Waiter{a, b}, true},
		{"the namespace at its cap, the cluster not", InFlight{Max: 10, MaxPerNamespace: 1}, a.Key, 3, shop(1), []Waiter{a}, false},
		{"per namespace: a longer wait elsewhere does not hold this one back", InFlight{MaxPerNamespace: 1}, a.Key, 5, nil, []Waiter{other, a}, true},
		{"cluster cap: a longer wait elsewhere goes first", InFlight{Max: 5}, a.Key, 4, nil, []Waiter{other, a}, false},
		{"both caps: a longer wait in a full namespace does not hold up another namespace", InFlight{Max: 10, MaxPerNamespace: 1},
			a.Key, 1, map[string]int{"blog": 1}, []Waiter{other, a}, true},
		{"just restarted: the rollouts under way counted from the workloads' records, nothing waiting yet", InFlight{Max: 2}, a.Key, 2, shop(2), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.cap.MayStart(tc.key, tc.rolling, tc.byNS, tc.waiting))
		})
	}
}
