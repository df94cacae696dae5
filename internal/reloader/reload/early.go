package reload

// Telling the app of a kubelet swap before the set is read. configmap-reload sends its request
// on the ..data event and reads nothing; a reloader that reads the folder first answers later by
// that read (0.1–0.2 ms on a small machine). Where any swap may be told as it is (the app reads
// the folders where they are, and nothing checks the set), the loop tells the app as soon as
// the source reports a swap, and the pass after the read only confirms it: it tells the app
// again only when the set read is not the one the early request covered. The read still merges
// a burst (a swap within Debounce of the last pass waits for the pass after the burst) and makes
// a swap to the same files, or one that fails to read, no second request.
//
// The source reports a swap only once the names the app sees are the new set's (kubelet links a
// new key's name, and removes a removed key's, just after the swap): at the ..data event when no
// name changes, as configmap-reload, on the event of the last name otherwise. A read and a swap
// waiting together go in that order (wait): the read is older.

import (
	"context"
	"time"

	"github.com/configwave/configwave/internal/reloader/source"
)

// swapSource is a Source that reports kubelet swaps before it reads them (source.Folders).
type swapSource interface {
	Swaps() <-chan source.Swap
}

// earlyTell is the request sent on a swap: each folder's ..data target when it was sent, and how
// it went. The pass that reads that set takes the request as its own, failed or not, so that a
// failing app is not sent a second round of retries, and the failure is reported and retried
// as any pass's.
type earlyTell struct {
	versions map[string]string
	err      error
}

// covers says whether the early request told the app of exactly the objects read: each is a
// folder read through the ..data target it had before the request was sent, with its names in
// place then and when read (a read of a folder whose names are not the set's has no Version). A
// target is never written again, so the app was told after these very files were in place under
// these names; a newer swap is reported, read and told in turn.
func (e *earlyTell) covers(objects []source.Object) bool {
	if e == nil || len(objects) == 0 {
		return false
	}
	for _, o := range objects {
		if o.Version == "" || e.versions[o.Name] != o.Version {
			return false
		}
	}
	return true
}

// tellsOnSwap says whether the app may be told of a swap before the set is read: it reads the
// folders where they are (InPlace; a rendered file is not written until the pass), and no
// check must pass first.
func tellsOnSwap(writer Target, check func(context.Context, string) error) bool {
	_, inPlace := writer.(*InPlace)
	return inPlace && check == nil
}

// mayTellEarly says whether a swap seen now may be told at once: the first set is live and every
// source exists (otherwise the pass decides what the app gets), and no burst is under way (a
// swap within debounce of the last pass is merged into one pass after the burst, as any change
// is).
func mayTellEarly(s state, sinceLastPass, debounce time.Duration) bool {
	return s.unpacked && s.waitingFor == "" && sinceLastPass >= debounce
}

// swaps is the source's report of swaps when the app may be told of them early; nil otherwise.
func (r *Reloader) swaps() <-chan source.Swap {
	s, ok := r.Source.(swapSource)
	if !ok || !tellsOnSwap(r.Writer, r.Check) {
		return nil
	}
	return s.Swaps()
}

// tellEarly tells the app of the swap sw at once when it may, and leaves what it told, and how,
// to the pass that follows the read.
func (r *Reloader) tellEarly(ctx context.Context, sw source.Swap, lastPass time.Time) {
	r.early = nil
	seen := r.clock().Now()
	if r.Notifier == nil || !mayTellEarly(r.st, seen.Sub(lastPass), r.Debounce) {
		return // the read signals Changed, and the pass tells the app
	}
	err := r.Notifier.Notify(ctx)
	if ctx.Err() != nil {
		return // shutting down: no pass follows
	}
	r.early = &earlyTell{versions: sw.Versions, err: err}
	if err == nil && r.Metrics != nil {
		r.Metrics.ReloadLatency.Observe(r.clock().Since(seen).Seconds())
	}
}

// drainSwaps drops a swap not taken yet: a pass reads after it, so its read is in the pass's
// snapshot, or signals Changed for the next pass.
func drainSwaps(swaps <-chan source.Swap) {
	select {
	case <-swaps:
	default:
	}
}
