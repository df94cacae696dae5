package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestAdoptedRevisionsDue(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	v1 := adoptedAt{rev: "rev-1", generation: 3}
	for _, tc := range []struct {
		name  string
		setup func(a *adoptedRevisions)
		at    adoptedAt
		now   time.Time
		want  bool
	}{
		{"just restarted: nothing remembered, given again (each reference is added once)", func(*adoptedRevisions) {}, v1, t0, true},
		{"given already", func(a *adoptedRevisions) { a.set("w", v1) }, v1, t0, false},
		{"a template change that kept the config: its new revision object too", func(a *adoptedRevisions) { a.set("w", v1) }, adoptedAt{rev: "rev-1", generation: 4}, t0, true},
		{"tried a moment ago, not found: not yet", func(a *adoptedRevisions) { a.tried("w", v1, t0) }, v1, t0.Add(10 * time.Second), false},
		{"tried a minute ago: again", func(a *adoptedRevisions) { a.tried("w", v1, t0) }, v1, t0.Add(adoptRetry), true},
		{"tried for another revision: this one at once", func(a *adoptedRevisions) { a.tried("w", v1, t0) }, adoptedAt{rev: "rev-2", generation: 4}, t0, true},
		{"made again since: given anew", func(a *adoptedRevisions) { a.set("w", v1); a.repaired("w") }, v1, t0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &adoptedRevisions{}
			tc.setup(a)
			assert.Equal(t, tc.want, a.due("w", tc.at, tc.now))
		})
	}
}
