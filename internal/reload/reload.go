// Package reload is the reloader's loop: a source snapshot becomes a file set, the set is
// checked and swapped in atomically, and the app is told, once per real change.
//
//	r := &reload.Reloader{Source: watcher, Writer: unpack.New(root), Layout: layout, Notifier: httpNotifier, Metrics: m}
//	err := r.Run(ctx)
//
// The loop is level-triggered: a change signal only says "look again"; each pass reads the
// whole current state, so merged, replayed or lost-and-relisted events cannot make the files
// differ from the API. Nothing is written and nobody is told when the content is unchanged.
package reload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/notify"
	"github.com/configwave/configwave/internal/source"
	"github.com/configwave/configwave/internal/unpack"
)

// Source is what the loop needs from a source.Watcher.
type Source interface {
	WaitForSync(ctx context.Context) bool
	Changed() <-chan struct{}
	Snapshot() source.Snapshot
}

// EventRecorder publishes a Kubernetes Event about the reloader's pod.
type EventRecorder interface {
	Event(eventtype, reason, message string)
}

// Reloader keeps the files under one root equal to its sources and tells the app.
type Reloader struct {
	Source Source
	Writer *unpack.Writer
	Layout Layout
	// Check, when set, runs against the new folder before the swap (--validate-command).
	Check func(ctx context.Context, dir string) error
	// Notifier tells the app (sidecar mode). In subprocess mode it is nil and OnFirstUnpack
	// starts the app and returns its notifier.
	Notifier      notify.Notifier
	OnFirstUnpack func() (notify.Notifier, error)
	// Debounce merges the changes of a burst: the loop waits until no change came for
	// Debounce (at most 10×Debounce in all) and then handles the final state once.
	Debounce time.Duration
	// RetryInterval is how soon a failed notification or disk write is tried again; default 30 s.
	RetryInterval time.Duration
	Metrics       *Metrics
	Events        EventRecorder // optional
	// HashKey keys the content hash shown in logs, Events and the config_info metric. The
	// reloader sets a random one per process when a Secret is among the sources: the hash then
	// still tells changes apart within the process, and tells nothing about the values.
	HashKey []byte

	ready atomic.Bool

	// loop state, owned by Run's goroutine
	unpacked     bool   // the first complete set is in place
	notifyDue    bool   // files changed but the app has not been told yet
	liveHash     string // hash of the set under the root
	rejectedHash string // last set the check rejected; not checked again until it changes
	waitingFor   string // missing sources last logged
	unusedItems  string // --items keys no source has, last logged
}

// Ready reports what /readyz serves: the first set is unpacked and the last reload worked.
func (r *Reloader) Ready() bool { return r.ready.Load() }

func (r *Reloader) setReady(v bool) {
	r.ready.Store(v)
	if r.Metrics != nil {
		if v {
			r.Metrics.Ready.Set(1)
		} else {
			r.Metrics.Ready.Set(0)
		}
	}
}

// Once unpacks the current state and returns, for an init container (--once). A missing
// named source is an error, so that kubelet retries the init container with backoff.
func (r *Reloader) Once(ctx context.Context) error {
	if !r.Source.WaitForSync(ctx) {
		return fmt.Errorf("list the sources: %w", context.Cause(ctx))
	}
	snap := r.Source.Snapshot()
	if len(snap.Missing) > 0 {
		return fmt.Errorf("%s not found: create it, or fix --configmap/--secret", joinRefs(snap.Missing))
	}
	files, err := r.Layout.Files(snap.Objects)
	if err != nil {
		return err
	}
	changed, err := r.Writer.WriteChecked(files, r.checkFunc(ctx))
	if err != nil {
		return err
	}
	klog.InfoS("config unpacked", "files", len(files), "changed", changed, "hash", KeyedHash(r.HashKey, files))
	return nil
}

// Run handles changes until ctx ends. It returns an error only when the app cannot be started.
func (r *Reloader) Run(ctx context.Context) error {
	if r.RetryInterval <= 0 {
		r.RetryInterval = 30 * time.Second
	}
	if !r.Source.WaitForSync(ctx) {
		return nil // ctx ended
	}
	var retry <-chan time.Time
	for {
		wantRetry, err := r.pass(ctx)
		if err != nil {
			return err
		}
		retry = nil
		if wantRetry {
			retry = time.After(r.RetryInterval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.Source.Changed():
			r.debounce(ctx)
		case <-retry:
		}
	}
}

func (r *Reloader) debounce(ctx context.Context) {
	if r.Debounce <= 0 {
		return
	}
	deadline := time.After(10 * r.Debounce)
	quiet := time.NewTimer(r.Debounce)
	defer quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-deadline:
			return
		case <-quiet.C:
			return
		case <-r.Source.Changed():
			quiet.Reset(r.Debounce)
		}
	}
}

func (r *Reloader) checkFunc(ctx context.Context) func(string) error {
	if r.Check == nil {
		return nil
	}
	return func(dir string) error { return r.Check(ctx, dir) }
}

// pass makes the files equal to the current state and tells the app if they changed. It
// reports whether it should run again after RetryInterval even without a change.
func (r *Reloader) pass(ctx context.Context) (retry bool, err error) {
	snap := r.Source.Snapshot()
	if len(snap.Missing) > 0 {
		missing := joinRefs(snap.Missing)
		if missing != r.waitingFor {
			r.waitingFor = missing
			if !r.unpacked {
				klog.InfoS("waiting for sources to exist before the first unpack", "missing", missing)
			} else {
				// Removing an app's config because its ConfigMap was deleted (perhaps to be
				// recreated) would break the app; the last set stays until the object is back.
				klog.InfoS("source deleted; keeping the last files until it is back", "missing", missing)
				r.event("Warning", "ConfigSourceMissing", fmt.Sprintf("%s not found; keeping the last config", missing))
			}
		}
		return false, nil
	}
	r.waitingFor = ""

	files, err := r.Layout.Files(snap.Objects)
	if err != nil {
		r.fail(ResultInvalidConfig, "InvalidConfig", err)
		return false, nil
	}
	if unused := strings.Join(r.Layout.UnusedItems(snap.Objects), ", "); unused != r.unusedItems {
		r.unusedItems = unused
		if unused != "" {
			klog.InfoS("warning: --items names keys that no source has; check their spelling", "keys", unused)
		}
	}
	hash := KeyedHash(r.HashKey, files)
	if hash == r.rejectedHash {
		return false, nil
	}
	changed, err := r.Writer.WriteChecked(files, r.checkFunc(ctx))
	switch {
	case errors.Is(err, ErrRejected):
		r.rejectedHash = hash
		r.fail(ResultValidationFailed, "ConfigRejected", fmt.Errorf("new config kept out, the app keeps the last good one: %w", err))
		return false, nil
	case ctx.Err() != nil:
		return false, nil
	case err != nil:
		r.fail(ResultWriteFailed, "ConfigWriteFailed", fmt.Errorf("unpack under the config root: %w", err))
		return true, nil
	}
	r.rejectedHash = ""
	if hash != r.liveHash && r.Metrics != nil {
		r.Metrics.ConfigInfo.Reset()
		r.Metrics.ConfigInfo.WithLabelValues(hash).Set(1)
	}
	r.liveHash = hash

	if !r.unpacked {
		r.unpacked = true
		klog.InfoS("config unpacked", "sources", len(snap.Objects), "files", len(files), "hash", hash)
		if r.OnFirstUnpack != nil {
			n, err := r.OnFirstUnpack()
			if err != nil {
				return false, err
			}
			r.Notifier = n
		}
		// The app reads this first set when it starts; there is nothing to reload yet.
		r.setReady(true)
		return false, nil
	}
	if changed {
		r.notifyDue = true
	}
	if !r.notifyDue || r.Notifier == nil {
		if !r.notifyDue && !r.Ready() {
			r.setReady(true) // e.g. a rejected set was reverted to the live one
		}
		return false, nil
	}
	start := time.Now()
	if err := r.Notifier.Notify(ctx); err != nil {
		if ctx.Err() != nil {
			return false, nil
		}
		r.fail(ResultNotifyFailed, "ReloadFailed", fmt.Errorf("new config is on disk but the app was not told: %w", err))
		return true, nil
	}
	r.notifyDue = false
	r.setReady(true)
	if r.Metrics != nil {
		r.Metrics.Reloads.WithLabelValues(ResultSuccess).Inc()
		r.Metrics.LastSuccess.SetToCurrentTime()
	}
	klog.InfoS("config changed, app reloaded", "sources", sourceList(snap.Objects), "hash", hash, "took", time.Since(start))
	r.event("Normal", "ConfigReloaded", fmt.Sprintf("config from %s changed (hash %s); app reloaded", sourceList(snap.Objects), hash[:12]))
	return false, nil
}

func (r *Reloader) fail(result, reason string, err error) {
	r.setReady(false)
	if r.Metrics != nil {
		r.Metrics.Reloads.WithLabelValues(result).Inc()
	}
	klog.ErrorS(err, "config not applied", "result", result)
	r.event("Warning", reason, err.Error())
}

func (r *Reloader) event(eventtype, reason, message string) {
	if r.Events != nil {
		r.Events.Event(eventtype, reason, message)
	}
}

func joinRefs(refs []source.Ref) string {
	s := make([]string, len(refs))
	for i, ref := range refs {
		s[i] = ref.String()
	}
	return strings.Join(s, ", ")
}

func sourceList(objs []source.Object) string {
	refs := make([]source.Ref, len(objs))
	for i, o := range objs {
		refs[i] = o.Ref
	}
	if len(refs) > 5 {
		return joinRefs(refs[:5]) + fmt.Sprintf(" and %d more", len(refs)-5)
	}
	return joinRefs(refs)
}
