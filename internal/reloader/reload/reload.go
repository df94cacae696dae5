// Package reload is the reloader's loop: a source snapshot becomes a file set, the set is
// checked and swapped in atomically, and the app is told, once per real change.
//
//	r := &reload.Reloader{Source: watcher, Writer: unpack.New(root), Layout: layout, Notifier: httpNotifier, Metrics: m}
//	err := r.Run(ctx)
//
// The loop is level-triggered: a change signal only says "look again"; each pass reads the
// whole current state, so merged, replayed or lost-and-relisted events cannot make the files
// differ from the API. Nothing is written and nobody is told when the content is unchanged.
//
// Each pass first finds out what happened (pass, which does the I/O and returns an outcome),
// then moves the loop's state in one step (state.next, a pure function) and reports the
// difference (report: logs, Events, metrics, /status). The two promises that matter most are
// kept in next: a set that went live stays due for a notification until the app is told,
// whatever later passes meet; and a rejected or invalid set never makes the reloader unready.
package reload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/reloader/notify"
	"github.com/configwave/configwave/internal/reloader/source"
	"github.com/configwave/configwave/internal/reloader/unpack"
)

// Source is what the loop needs from a source (package source: the API, or mounted folders).
type Source interface {
	WaitForSync(ctx context.Context) bool
	Changed() <-chan struct{}
	Snapshot() source.Snapshot
}

// Observer sees what each pass did, for the series a peer's users alert on (package compat).
type Observer interface {
	Pass(p PassReport)
}

// PassReport is what one pass did, as an Observer sees it.
type PassReport struct {
	Applied  bool  // the sources' set was looked at: every pass whose sources all exist
	ApplyErr error // that set could not go live: invalid, rejected or not written
	Told     bool  // the app was told in this pass
	TellErr  error // the app was due and could not be told
	UpToDate bool  // what configwave_reloader_last_reload_successful says after the pass
}

// FileSet turns a snapshot into the files the app reads: Layout lays ConfigMaps' and Secrets'
// keys out under the config root; Mounted takes folders that are already on disk as they are.
// An object that cannot be laid out fails the set, or is left out of it (Layout.Isolate).
type FileSet interface {
	Files(objects []source.Object) (map[string]unpack.File, []LeftOut, error)
}

// unusedItemser is a FileSet that can name the --items keys no source has (Layout).
type unusedItemser interface {
	UnusedItems(objects []source.Object) []string
}

// Target is where a file set goes live. An unpack.Writer writes it under the config root with a
// ..data swap; InPlace accepts folders the app already reads where they are.
type Target interface {
	// WriteChecked makes files live once check (which may be nil) accepted them in dir, and
	// reports whether what the app reads changed.
	WriteChecked(files map[string]unpack.File, check func(dir string) error) (changed bool, err error)
	// HasLiveSet reports whether a set that an earlier run made live is there at start.
	HasLiveSet() bool
}

// EventRecorder publishes a Kubernetes Event about the reloader's pod.
type EventRecorder interface {
	Event(eventtype, reason, message string)
}

// Reloader keeps the files under one root equal to its sources and tells the app.
type Reloader struct {
	Source Source
	Writer Target
	Layout FileSet
	// Check, when set, runs against the new folder before the swap (--validate-command).
	Check func(ctx context.Context, dir string) error
	// Notifier tells the app (sidecar mode). In subprocess mode it is nil and OnFirstUnpack
	// starts the app and returns its notifier.
	Notifier      notify.Notifier
	OnFirstUnpack func() (notify.Notifier, error)
	// Debounce spaces reloads: a change after a quiet period is applied at once, and changes
	// that come while a reload is under way or within Debounce after it are merged into one
	// more pass, once no change came for Debounce (at most 10×Debounce after the first).
	Debounce time.Duration
	// RetryInterval is how soon a failed notification or disk write is tried again; default 30 s.
	RetryInterval time.Duration
	// UnhealthyAfter, when set, makes Healthy fail once the app has kept failing to reload for
	// that long (--unhealthy-after), so that kubelet restarts the pod.
	UnhealthyAfter time.Duration
	Metrics        *Metrics
	Events         EventRecorder // optional
	// TellOnStart tells the app once the first set is live (prometheus-config-reloader's start
	// with --config-file: the app may have read its config before the rendered file was there).
	TellOnStart bool
	// Observer, when set, sees what each pass did: the series of a peer (package compat).
	Observer Observer
	// Told, when set, remembers beside the config which set the app last took, so that a
	// restarted reloader tells the app again when that is not the set on disk (sidecar mode).
	Told *ToldRecord
	// HashKey keys the content hash shown in logs, Events and the config_info metric. The
	// reloader sets a random one per process when a Secret is among the sources: the hash then
	// still tells changes apart within the process, and tells nothing about the values.
	HashKey []byte

	st     state                  // owned by Run's goroutine
	early  *earlyTell             // a request sent on a swap, for the next pass; owned by Run's goroutine
	status atomic.Pointer[Status] // what the HTTP handlers read
	clk    clock.Clock            // nil: the real clock; tests step a fake one instead of sleeping
}

// Ready reports what /readyz serves: the first set is unpacked. A rejected or invalid config
// later does not change it: every replica rejects the same bad ConfigMap at the same moment,
// and a Service with no ready endpoint is an outage that the last good config would not cause.
func (r *Reloader) Ready() bool { s := r.status.Load(); return s != nil && s.Ready }

// Healthy reports what /healthz serves: an error once the app has kept failing to take new
// config for UnhealthyAfter, so that kubelet restarts the pod; nil otherwise.
func (r *Reloader) Healthy() error {
	s := r.status.Load()
	if r.UnhealthyAfter <= 0 || s == nil || s.FailingSince == nil {
		return nil
	}
	if d := r.clock().Since(*s.FailingSince); d >= r.UnhealthyAfter {
		return fmt.Errorf("the app has failed to reload for %s (--unhealthy-after=%s): %s", d.Round(time.Millisecond), r.UnhealthyAfter, s.NotifyError)
	}
	return nil
}

// CurrentStatus is the state /status serves.
func (r *Reloader) CurrentStatus() Status {
	if s := r.status.Load(); s != nil {
		return *s
	}
	return Status{}
}

func (r *Reloader) clock() clock.Clock {
	if r.clk != nil {
		return r.clk
	}
	return clock.RealClock{}
}

// Once unpacks the current state and returns, for an init container (--once). A missing
// named source is an error, so that kubelet retries the init container with backoff.
func (r *Reloader) Once(ctx context.Context) error {
	if !r.Source.WaitForSync(ctx) {
		return fmt.Errorf("list the sources: %w", context.Cause(ctx))
	}
	snap := r.Source.Snapshot()
	if len(snap.Missing) > 0 {
		fix := "--configmap/--secret"
		if snap.Missing[0].Kind == source.Folder {
			fix = "--volume-dir or --config-file"
		}
		return fmt.Errorf("%s not found: create it, or fix %s", joinRefs(snap.Missing), fix)
	}
	files, left, err := r.Layout.Files(snap.Objects)
	if err != nil {
		return err
	}
	for _, l := range left {
		klog.InfoS("warning: object left out of the config", "object", l.Ref.String(), "why", l.Why)
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
	r.publish()
	if r.Told != nil && r.OnFirstUnpack == nil {
		if err := r.Told.Load(); err != nil {
			klog.InfoS("warning: "+err.Error(), "file", r.Told.Path)
		}
	} else {
		r.Told = nil // a child the reloader starts reads the set as it starts
	}
	if !r.Source.WaitForSync(ctx) {
		return nil // ctx ended
	}
	var retry <-chan time.Time
	var changedAt time.Time // the first change the app has not been told of; zero: none
	swaps := r.swaps()
	for {
		drainSwaps(swaps)
		o, err := r.pass(ctx)
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil // a pass cut short by shutdown is no result
		}
		prev := r.st
		r.st = prev.next(o, r.clock().Now())
		r.report(prev, o)
		r.publish()
		ended := r.clock().Now()
		changedAt = r.observeLatency(changedAt, o, ended)

		retry = nil
		if o.retry {
			retry = r.clock().After(r.RetryInterval)
		}
		if !r.wait(ctx, ended, retry, swaps, &changedAt) {
			return nil
		}
	}
}

// wait blocks until the next pass is due: after a change (settled) or at retry. It returns false
// when ctx ended. A swap the source reports meanwhile may be told at once (tellEarly).
func (r *Reloader) wait(ctx context.Context, lastPass time.Time, retry <-chan time.Time, swaps <-chan source.Swap, changedAt *time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-r.Source.Changed():
			r.changed(ctx, lastPass, changedAt)
			return true
		case <-retry:
			return true
		case sw := <-swaps:
			select {
			case <-r.Source.Changed():
				// A read that no pass took waits too (select picks either at random). The
				// source reads after each swap it reports, so that read is of an earlier swap,
				// or of sw itself: the pass goes first, and confirms a request sent on an
				// earlier swap, or tells the app of sw. Telling of sw first would leave the
				// older read not covered: the pass would send a request for a stale set, and
				// the pass after sw's read one more.
				r.changed(ctx, lastPass, changedAt)
				return true
			default:
			}
			r.tellEarly(ctx, sw, lastPass)
		}
	}
}

// changed notes a change signal: when the first change not told came, and when the pass is due.
func (r *Reloader) changed(ctx context.Context, lastPass time.Time, changedAt *time.Time) {
	if changedAt.IsZero() {
		*changedAt = r.clock().Now()
	}
	r.settle(ctx, lastPass)
}

// observeLatency counts the time from the change changedAt to a pass that told the app, and
// says from when the next one counts: a pass that will be retried keeps the change pending,
// one with nothing to tell (the same content, a rejected set) ends it.
func (r *Reloader) observeLatency(changedAt time.Time, o outcome, now time.Time) time.Time {
	switch {
	case changedAt.IsZero() || o.retry:
		return changedAt
	case o.notified && !o.early && r.Metrics != nil: // an early request was observed when sent
		r.Metrics.ReloadLatency.Observe(now.Sub(changedAt).Seconds())
	}
	return time.Time{}
}

// settle decides when a pass follows a change signal. The first change after a quiet period is
// handled at once (leading edge). A change that came while the last pass ran, or within
// Debounce after it, is part of a burst: wait until no change came for Debounce, at most
// 10×Debounce, and handle the final state once (trailing edge).
func (r *Reloader) settle(ctx context.Context, lastPass time.Time) {
	if r.Debounce <= 0 || r.clock().Since(lastPass) >= r.Debounce {
		return
	}
	deadline := r.clock().NewTimer(10 * r.Debounce)
	defer deadline.Stop()
	quiet := r.clock().NewTimer(r.Debounce)
	defer quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C():
			return
		case <-quiet.C():
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

// pass makes the files equal to the current state where it can, and tells the app whenever a
// set is live that the app has not been told of, whatever else this pass met.
func (r *Reloader) pass(ctx context.Context) (outcome, error) {
	var o outcome
	r.write(ctx, &o)
	early := r.early
	r.early = nil // it covers the set this pass read, or none to come
	if o.first && r.OnFirstUnpack != nil {
		n, err := r.OnFirstUnpack()
		if err != nil {
			return o, err
		}
		r.Notifier = n // the app reads this first set as it starts: nothing to tell yet
		return o, nil
	}
	if r.Notifier == nil {
		o.nobody = true
		return o, nil
	}
	due := r.st.notifyDue || (o.swapped && r.st.unpacked) || o.tellOnStart
	if !due {
		if o.first && r.Told != nil && !r.Told.Recorded() {
			// A first start on an empty volume (the app reads this set as it starts), or a
			// reloader that kept no record before: the set on disk is the one the app runs.
			r.saveTold(o)
		}
		return o, nil
	}
	var err error
	if o.early {
		err = early.err // the app was told, or failed to be, when the swap was seen
	} else {
		err = r.Notifier.Notify(ctx)
	}
	if err != nil {
		if ctx.Err() == nil {
			o.notifyErr = fmt.Errorf("new config is on disk but the app was not told: %w", err)
			o.retry = true
		}
		return o, nil
	}
	o.notified = true
	r.saveTold(o)
	return o, nil
}

// saveTold records the set the app was just told of: the one that went live in this pass, or
// the live one an earlier pass left due.
func (r *Reloader) saveTold(o outcome) {
	if r.Told == nil {
		return
	}
	sum := r.st.liveSum
	if o.swapped || o.first {
		sum = o.sum
	}
	if err := r.Told.Save(sum); err != nil {
		klog.InfoS("warning: a restarted reloader may tell the app once more than needed", "err", err.Error())
	}
}

// write lays the snapshot out and swaps it in, recording in o what happened.
func (r *Reloader) write(ctx context.Context, o *outcome) {
	snap := r.Source.Snapshot()
	if len(snap.Missing) > 0 {
		// Removing an app's config because its ConfigMap was deleted (perhaps to be recreated)
		// would break the app; the last set stays until the object is back.
		o.missing = joinRefs(snap.Missing)
		return
	}
	files, left, err := r.Layout.Files(snap.Objects)
	if err != nil {
		o.result, o.reason, o.err = ResultInvalidConfig, "InvalidConfig", err
		return
	}
	o.leftOut = left
	if l, ok := r.Layout.(unusedItemser); ok {
		o.unusedItems = strings.Join(l.UnusedItems(snap.Objects), ", ")
	}
	o.sources = sourceList(snap.Objects)
	o.hash = KeyedHash(r.HashKey, files)
	if o.hash == r.st.rejected {
		return // already rejected and reported; checked again once the sources change
	}
	// A sidecar restarted by kubelet finds the set its predecessor wrote; if the current one
	// differs, the app is still running the old one and must be told once.
	leftBehind := !r.st.unpacked && r.OnFirstUnpack == nil && r.Writer.HasLiveSet()
	changed, err := r.Writer.WriteChecked(files, r.checkFunc(ctx))
	switch {
	case ctx.Err() != nil:
		return
	case errors.Is(err, ErrRejected):
		o.result, o.reason = ResultValidationFailed, "ConfigRejected"
		o.err = fmt.Errorf("new config kept out, the app keeps the last good one: %w", err)
		o.liveKept = leftBehind
		return
	case err != nil && !changed:
		o.result, o.reason, o.retry = ResultWriteFailed, "ConfigWriteFailed", true
		o.err = fmt.Errorf("unpack under the config root: %w", err)
		return
	case err != nil:
		// The new set is live (..data was swapped); a step after it failed. The app must
		// still be told, and the step is tried again.
		o.result, o.reason, o.retry = ResultWriteFailed, "ConfigWriteFailed", true
		o.err = fmt.Errorf("new config is live, but finishing the swap under the config root failed: %w", err)
	}
	o.swapped = changed
	o.early = r.early.covers(snap.Objects)
	o.first = !r.st.unpacked
	if r.Told != nil && (o.swapped || o.first) {
		o.sum = r.Told.Sum(files) // only a set that goes live can be recorded as told
	}
	// The record, when there is one, knows better: the set its predecessor last got to the app.
	untold := r.Told != nil && o.first && r.Told.Untold(o.sum)
	o.tellOnStart = o.first && (changed && (leftBehind || r.TellOnStart) || untold)
	o.untold = o.first && untold && !changed
}

func (r *Reloader) count(result string) {
	if r.Metrics != nil {
		r.Metrics.Reloads.WithLabelValues(result).Inc()
	}
}

func (r *Reloader) event(eventtype, reason, message string) {
	if r.Events != nil {
		r.Events.Event(eventtype, reason, message)
	}
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func joinRefs(refs []configref.Ref) string {
	s := make([]string, len(refs))
	for i, ref := range refs {
		s[i] = ref.String()
	}
	return strings.Join(s, ", ")
}

func sourceList(objs []source.Object) string {
	refs := make([]configref.Ref, len(objs))
	for i, o := range objs {
		refs[i] = o.Ref
	}
	if len(refs) > 5 {
		return joinRefs(refs[:5]) + fmt.Sprintf(" and %d more", len(refs)-5)
	}
	return joinRefs(refs)
}
