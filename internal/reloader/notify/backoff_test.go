package notify

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBackoffWaits(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		b    Backoff
		want []time.Duration
	}{
		{"the default: eight tries, the cap reached and kept", DefaultBackoff,
			[]time.Duration{200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 10 * time.Second}},
		{"one try: no wait", Backoff{Duration: time.Second, Factor: 2, Steps: 1}, nil},
		{"no factor: the same wait", Backoff{Duration: ms, Steps: 3}, []time.Duration{ms, ms}},
		{"a first wait above the cap is the cap", Backoff{Duration: time.Minute, Factor: 2, Steps: 3, Cap: time.Second},
			[]time.Duration{time.Second, time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.b.waits())
		})
	}
}

func TestBackoffRetryGivesEveryTry(t *testing.T) {
	tries := 0
	ok, err := Backoff{Duration: time.Microsecond, Factor: 10, Steps: 8, Cap: 2 * time.Millisecond, Jitter: 0.2}.retry(context.Background(), func() bool {
		tries++
		return false
	})
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, 8, tries, "reaching the cap does not end the tries")

	tries = 0
	ok, err = Backoff{Duration: time.Microsecond, Steps: 8}.retry(context.Background(), func() bool { tries++; return tries == 3 })
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 3, tries)

	ctx, cancel := context.WithCancel(context.Background())
	tries = 0
	ok, err = Backoff{Duration: time.Hour, Steps: 8}.retry(ctx, func() bool { tries++; cancel(); return false })
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, ok)
	assert.Equal(t, 1, tries, "a cancelled wait ends the tries")
}
