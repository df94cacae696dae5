package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/configwave/configwave/internal/refs"
)

func TestReloaderResume(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	renamed := refs.DefaultStakaterNames
	renamed.PausedAt, renamed.PausePeriod = "example.com/paused-at", "example.com/pause"
	tests := []struct {
		name        string
		paused      bool
		annotations map[string]string
		dialect     refs.StakaterDialect
		wantWait    time.Duration
		wantReloads bool
	}{
		{name: "not paused", annotations: map[string]string{refs.StakaterPausedAt: at(-time.Hour), refs.StakaterPausePeriod: "5m"}},
		{name: "the user's own pause: no paused-at", paused: true, annotations: map[string]string{refs.StakaterPausePeriod: "5m"}},
		{name: "period over", paused: true, annotations: map[string]string{refs.StakaterPausedAt: at(-10 * time.Minute), refs.StakaterPausePeriod: "5m"}, wantReloads: true},
		{name: "period running", paused: true, annotations: map[string]string{refs.StakaterPausedAt: at(-time.Minute), refs.StakaterPausePeriod: "5m"}, wantWait: 4 * time.Minute, wantReloads: true},
		{name: "paused-at not RFC 3339: at once, as Reloader", paused: true, annotations: map[string]string{refs.StakaterPausedAt: "yesterday", refs.StakaterPausePeriod: "5m"}, wantReloads: true},
		{name: "paused-at in the future: at once", paused: true, annotations: map[string]string{refs.StakaterPausedAt: at(time.Hour), refs.StakaterPausePeriod: "5m"}, wantReloads: true},
		{name: "pause-period gone: at once", paused: true, annotations: map[string]string{refs.StakaterPausedAt: at(-time.Second)}, wantReloads: true},
		{name: "pause-period not a duration: at once", paused: true, annotations: map[string]string{refs.StakaterPausedAt: at(-time.Second), refs.StakaterPausePeriod: "five"}, wantReloads: true},
		{name: "renamed annotations", paused: true, dialect: refs.StakaterDialect{Names: renamed},
			annotations: map[string]string{"example.com/paused-at": at(-time.Minute), "example.com/pause": "2m"}, wantWait: time.Minute, wantReloads: true},
		{name: "the default names once renamed: not Reloader's", paused: true, dialect: refs.StakaterDialect{Names: renamed},
			annotations: map[string]string{refs.StakaterPausedAt: at(-time.Minute), refs.StakaterPausePeriod: "2m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wait, reloaders := reloaderResume(tt.paused, tt.annotations, tt.dialect, now)
			assert.Equal(t, tt.wantReloads, reloaders)
			assert.Equal(t, tt.wantWait, wait)
		})
	}
}
