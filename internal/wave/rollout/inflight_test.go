package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOthersInFlight(t *testing.T) {
	for _, tc := range []struct {
		name     string
		byNS     map[string]int
		rolling  int
		self     bool
		admitted map[string]bool
		want     int
		wantByNS map[string]int
	}{
		{"none under way", map[string]int{}, 0, false, nil, 0, map[string]int{}},
		{"others followed and admitted", map[string]int{"a": 2}, 2, false, map[string]bool{"Deployment/b/x": true}, 3, map[string]int{"a": 2, "b": 1}},
		{"its own rollout followed (a second change while it rolls): no other's slot", map[string]int{"a": 2}, 2, true, nil, 1, map[string]int{"a": 1}},
		{"its own admission not followed yet (a look on a cache without its write): no other's slot", map[string]int{}, 0, false, map[string]bool{"Deployment/a/me": true}, 0, map[string]int{}},
		{"its own admission beside another's", map[string]int{}, 0, false, map[string]bool{"Deployment/a/me": true, "StatefulSet/a/db": true}, 1, map[string]int{"a": 1}},
		{"just restarted: nothing admitted, the former leader's rollouts followed", map[string]int{"a": 1, "b": 3}, 4, false, map[string]bool{}, 4, map[string]int{"a": 1, "b": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, byNS := othersInFlight("Deployment/a/me", "a", tc.byNS, tc.rolling, tc.self, tc.admitted)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantByNS, byNS)
		})
	}
}
