package notify

import (
	"context"
	"errors"
	"sync"
)

// All tells several apps, or several endpoints of one (--reload-http given more than once, or
// configmap-reload's repeated --webhook-url), at the same time, each with its own retries, so
// that one endpoint that does not answer delays no other. The error names every one that
// failed.
type All []Notifier

// Notify tells every notifier and waits for all of them.
func (a All) Notify(ctx context.Context) error {
	if len(a) == 1 {
		return a[0].Notify(ctx)
	}
	errs := make([]error, len(a))
	var wg sync.WaitGroup
	for i, n := range a {
		wg.Go(func() { errs[i] = n.Notify(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
