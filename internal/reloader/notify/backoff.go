package notify

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff spaces the tries of a request: Steps tries in all, the first at once, then after
// Duration, multiplied by Factor after each try up to Cap, each wait lengthened by up to
// Jitter of itself so that sidecars that failed together do not retry together.
//
// Unlike apimachinery's wait.Backoff, reaching Cap does not end the tries: a request given
// eight tries (--reload-http-tries, configmap-reload's --webhook-retries) gets eight.
type Backoff struct {
	Duration time.Duration
	Factor   float64
	Jitter   float64
	Steps    int
	Cap      time.Duration
}

// waits is the wait before each try after the first: len Steps-1, without jitter.
func (b Backoff) waits() []time.Duration {
	var out []time.Duration
	d := b.Duration
	for i := 1; i < b.Steps; i++ {
		if b.Cap > 0 && d > b.Cap {
			d = b.Cap
		}
		out = append(out, d)
		if b.Factor > 0 {
			d = time.Duration(float64(d) * b.Factor)
		}
	}
	return out
}

// retry calls try until it returns true, the tries run out (false, nil), or ctx ends (its error).
func (b Backoff) retry(ctx context.Context, try func() bool) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if try() {
		return true, nil
	}
	for _, d := range b.waits() {
		if b.Jitter > 0 {
			d += time.Duration(rand.Float64() * b.Jitter * float64(d)) //nolint:gosec // spacing retries, not a secret
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
		if try() {
			return true, nil
		}
	}
	return false, nil
}
