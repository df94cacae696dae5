package brake

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)

// replay applies changes every gap from t0 and says after which one the source was braked (0:
// never).
func replay(r Rule, n int, gap time.Duration) (State, int) {
	var s State
	brakedAt := 0
	for i := 1; i <= n; i++ {
		s = s.Changed(t0.Add(time.Duration(i-1)*gap), r)
		if braked, _ := s.Braked(t0.Add(time.Duration(i-1)*gap), r); braked && brakedAt == 0 {
			brakedAt = i
		}
	}
	return s, brakedAt
}

func TestDefaultRule(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n        int
		gap      time.Duration
		brakedAt int
	}{
		{"a machine: 40 writes in 20 s, braked at the 10th, well before 20 rollouts", 40, 500 * time.Millisecond, 10},
		{"a person: an edit every 7 s for ten minutes, never", 90, 7 * time.Second, 0},
		{"a burst of 9 (one kubectl apply of many objects is one per object), never", 9, 10 * time.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, at := replay(Default, tc.n, tc.gap)
			assert.Equal(t, tc.brakedAt, at)
		})
	}
}

func TestReleasedWhenQuiet(t *testing.T) {
	s, _ := replay(Default, 40, 500*time.Millisecond)
	last := t0.Add(39 * 500 * time.Millisecond)
	braked, quietAt := s.Braked(last.Add(59*time.Second), Default)
	assert.True(t, braked, "quiet less than a minute: still braked")
	assert.Equal(t, last.Add(time.Minute), quietAt)
	braked, _ = s.Braked(last.Add(time.Minute), Default)
	assert.False(t, braked, "quiet for a minute: released")
	// A change while braked keeps it braked and moves the release.
	s = s.Changed(last.Add(30*time.Second), Default)
	_, quietAt = s.Braked(last.Add(31*time.Second), Default)
	assert.Equal(t, last.Add(90*time.Second), quietAt)
	// Released, one change is one change again.
	s = s.Changed(last.Add(3*time.Minute), Default)
	braked, _ = s.Braked(last.Add(3*time.Minute), Default)
	assert.False(t, braked)
}

func TestParseRule(t *testing.T) {
	r, err := ParseRule("10/1m")
	require.NoError(t, err)
	assert.Equal(t, Default, r)
	r, err = ParseRule("0")
	require.NoError(t, err)
	assert.Equal(t, Rule{}, r)
	s, _ := replay(r, 100, time.Millisecond)
	braked, _ := s.Braked(t0, r)
	assert.False(t, braked, "0 never brakes")
	for _, bad := range []string{"10", "1/1m", "10/0s", "x/1m", "10/48h"} {
		_, err := ParseRule(bad)
		assert.ErrorContains(t, err, "WRITES/DURATION", bad)
	}
	assert.Equal(t, "10/1m0s", Default.String())
}
