package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/approval"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/window"
	"github.com/configwave/configwave/internal/wave/workload"
)

// finishWithin bounds the writes of one look, which run to the end when wave is stopping.
const finishWithin = 30 * time.Second

// errFinishTimeout is the cause of a look's writes cut at finishWithin; made once, as every
// look sets it up.
var errFinishTimeout = fmt.Errorf("the writes of one look took longer than %s", finishWithin)

// ErrLeaseLost is the cause with which the leader election cancels Run's context when this
// replica no longer holds the Lease: another replica may lead already, so every write stops at
// once, a look under way included.
var ErrLeaseLost = errors.New("lost the leader Lease")

// finishing gives the writes of one look their context. A look under way when wave is asked to
// stop finishes its writes (bounded): a Job started and no record of it, or the reverse, would
// be a change run twice or never. A lost Lease stops them at once, since then two replicas
// writing would be the same harm.
func finishing(ctx context.Context) (context.Context, context.CancelFunc) {
	detached, abandon := context.WithCancelCause(context.WithoutCancel(ctx))
	wctx, cancel := context.WithTimeoutCause(detached, finishWithin, errFinishTimeout)
	stop := context.AfterFunc(ctx, func() {
		if err := context.Cause(ctx); errors.Is(err, ErrLeaseLost) {
			abandon(err)
		}
	})
	return wctx, func() { stop(); cancel(); abandon(nil) }
}

// apply performs a decision: the warnings, then the write, then what the write means (Events,
// the log line, a CronJob's Job, following the rollout). A rollout waits here for its turn
// under the cluster-wide --update-rate, which is shared by every workload.
func (c *Controller) apply(ctx context.Context, w workload.Workload, d decision) (string, error) {
	key := w.Key()
	if d.Result == ResultIgnored {
		c.forget(key) // never written to
		return d.Result, nil
	}
	for _, msg := range d.Warn {
		c.Recorder.Event(w.Object, corev1.EventTypeWarning, "InvalidAnnotation", msg)
	}
	c.warned.set(key, d.Warned)
	c.heldBack.set(key, d.HeldBack) // any other result than the hold ends it (a rollout, revisions off)
	c.approvals.set(key, pendingSince(w, d))
	c.brakeSaid.set(key, d.BrakeSaid) // any other result than the brake ends it
	if d.Write == "rollout" {
		if wait := c.pace.Turn(key, time.Now()); wait > 0 {
			d = decision{Result: ResultHeld, HoldFor: wait, Wanted: d.Wanted,
				Log: &logLine{V: 2, Msg: "rollout held", KV: []any{"for", wait.Round(time.Millisecond), "why", fmt.Sprintf("waiting for its turn under --update-rate=%g", c.UpdateRate)}}}
		}
	}
	if d.Write != "rollout" && d.Result != ResultHeld {
		c.flight.leave(key) // nothing to roll: it holds up no other rollout
	}
	if d.Write == "rollout" && c.InFlight.On() && !w.Progress.Untracked {
		var admitted bool
		if d, admitted = c.admitOrQueue(w, d); admitted {
			defer c.started(key) // spent once written: followed as rolling from then on
		}
	}
	ctx, cancel := finishing(ctx)
	defer cancel()
	if d.Revision != "" && d.Write == "rollout" && !c.DryRun {
		// Before the template names the revision, so that its first pod finds the snapshots.
		// A source written since the decision is decided again on its new content; anything
		// else rolls on the live objects, and says so once here (the webhook says it per pod).
		if err := c.ensureRevision(ctx, w, d.Revision); errors.Is(err, revisions.ErrSourceChanged) {
			return "", err // a cache a moment behind, as a 409 is: decided again
		} else if err != nil {
			c.Recorder.Eventf(w.Object, corev1.EventTypeWarning, "ConfigRevisionFailed", "%v; the pods of this rollout read the live objects until the next change of their config", err)
		}
	}
	if d.Repair != "" && !c.DryRun {
		// Tried once in a while, whatever comes of it: a repair that cannot be made (quota,
		// RBAC) is said, and never stops the rest of the look (followUp).
		c.repairs.tried(key, d.Repair, time.Now())
		if err := c.ensureRevision(ctx, w, d.Repair); err != nil {
			d.Events = []event{{corev1.EventTypeWarning, "ConfigRevisionFailed", fmt.Sprintf(
				"the index and snapshots of revision %s are gone while its pods run it, and could not be made again: %v; a pod whose container restarts cannot start until they are: grant what the error names, or roll the workload", d.Repair, err)}}
		} else {
			c.adopted.repaired(key) // given to the revision object again, by followUp below
		}
	}
	var restartErr error
	if d.Restart {
		restartErr = c.restartJob(ctx, w, d)
	}
	var err error
	switch d.Write {
	case "scheduler":
		err = c.restoreScheduling(ctx, w, d.Scheduler)
	case "":
	default:
		err = c.patch(ctx, w, d)
	}
	if err != nil {
		return "", err
	}
	for _, e := range d.Events {
		c.Recorder.Event(w.Object, e.Type, e.Reason, e.Message)
	}
	if l := d.Log; l != nil {
		// Checked first: with the level off, building the arguments (the workload's name among
		// them) would be all the line costs.
		if v := klog.V(klog.Level(l.V)); v.Enabled() {
			v.InfoS(l.Msg, append([]any{"workload", w.String()}, l.KV...)...)
		}
	}
	if restartErr != nil {
		c.Recorder.Eventf(w.Object, corev1.EventTypeWarning, "RestartFailed", "%v; its next scheduled run uses the new config", restartErr)
	}
	if d.Follow {
		c.follow.Started(key, d.Record)
	}
	if d.LookAgainIn > 0 {
		c.queue.AddAfter(key, d.LookAgainIn)
	}
	if d.HoldFor > 0 {
		c.pace.Want(key, d.Wanted)
		c.queue.AddAfter(key, d.HoldFor)
	} else if d.Write == "rollout" {
		c.pace.Rolled(key)
	} else {
		c.pace.Abandon(key, time.Now()) // nothing to roll any more
	}
	if d.Result != ResultRolled {
		if err := c.followUp(ctx, w); err != nil {
			return "", err
		}
	}
	return d.Result, nil
}

// admitOrQueue lets a rollout start under --max-rollouts-in-flight, or turns the decision into
// a hold until a rollout under way is over; admitted says it may start.
func (c *Controller) admitOrQueue(w workload.Workload, d decision) (_ decision, admitted bool) {
	first := d.Wanted
	if first.IsZero() {
		first = time.Now()
	}
	ok, queuedNow := c.admit(w.Key(), w.Meta.Namespace, first)
	if ok {
		return d, true
	}
	// Looked at again when a rollout under way is over (followUp); the fallback look only
	// covers a finish this replica did not see.
	held := decision{Result: ResultHeld, HoldFor: 30 * time.Second, Wanted: first,
		Log: &logLine{V: 2, Msg: "rollout held", KV: []any{"why", fmt.Sprintf("waiting for a rollout under way to finish (--max-rollouts-in-flight=%d, per namespace %d)", c.InFlight.Max, c.InFlight.MaxPerNamespace)}}}
	if queuedNow {
		held.Events = []event{{corev1.EventTypeNormal, "ConfigRolloutQueued", fmt.Sprintf(
			"the config rollout waits for one of the rollouts under way to finish (--max-rollouts-in-flight=%d, per namespace %d); the longest waiting goes first", c.InFlight.Max, c.InFlight.MaxPerNamespace)}}
	}
	return held, false
}

// restartJob starts a CronJob's Job with the new config. It runs before the write: once the
// record says rolled, no later look would start the Job. A repeated try finds the Job made
// (RestartID); one that cannot be made is said in an Event, and the change is recorded all the
// same: its next scheduled run uses it.
func (c *Controller) restartJob(ctx context.Context, w workload.Workload, d decision) error {
	written := map[string]string{}
	if d.InputsHash != "" {
		written[InputsHashAnnotation] = d.InputsHash
	}
	if d.Hash != "" {
		written[podrefs.ConfigHashAnnotation] = d.Hash
	}
	rw := workload.WithTemplateAnnotations(w, written)
	return retry.OnError(retry.DefaultBackoff, func(error) bool { return ctx.Err() == nil }, func() error { return workload.Restart(ctx, c.clients(), rw, d.RestartID) })
}

// patch writes the inputs record (unless inputs is nil), the rollout record and, for a rollout,
// the template annotations, in one merge patch carrying the resourceVersion the decision was
// made on: if the workload changed in between, the API server answers 409 and the workload is
// reconciled again.
func (c *Controller) patch(ctx context.Context, w workload.Workload, d decision) error {
	what, inputs, rec, hash, inHash, restartAt := d.Write, d.Inputs, d.Record, d.Hash, d.InputsHash, d.RestartAt
	type meta struct {
		Annotations     map[string]any `json:"annotations"`
		Labels          map[string]any `json:"labels,omitempty"`
		ResourceVersion string         `json:"resourceVersion,omitempty"`
	}
	var labels map[string]any
	switch {
	case d.Revision != "":
		labels = map[string]any{revisions.RevisionLabel: d.Revision, revisions.FollowedLabel: nilIfEmpty(d.Followed)}
	case d.ClearRevision:
		labels = map[string]any{revisions.RevisionLabel: nil, revisions.FollowedLabel: nil}
	}
	annotations := map[string]any{}
	if inputs != nil {
		annotations[InputsAnnotation] = *inputs
	}
	if d.ClearApproval {
		annotations[approval.ApproveAnnotation] = nil // it approved this rollout, and no later one
	}
	if d.ClearRolloutNow {
		annotations[window.NowAnnotation] = nil // it asked for this rollout
	}
	if d.ClearReject {
		annotations[approval.RejectAnnotation] = nil // recorded, or about another change
	}
	switch {
	case rec != (rolloutrecord.Record{}):
		annotations[rolloutrecord.Annotation] = rec.String()
	case w.Meta.Annotations[rolloutrecord.Annotation] != "":
		annotations[rolloutrecord.Annotation] = nil // nothing left to say: a merge patch's null deletes it
	}
	body := map[string]any{"metadata": meta{Annotations: annotations, Labels: labels, ResourceVersion: w.Meta.ResourceVersion}}
	if !restartAt.IsZero() {
		maps.Copy(body, workload.RestartAtPatch(w.Kind, restartAt))
	}
	if inHash != "" {
		tmpl := map[string]string{InputsHashAnnotation: inHash}
		if hash != "" {
			tmpl[podrefs.ConfigHashAnnotation] = hash
		}
		maps.Copy(body, workload.TemplatePatch(w.Kind, map[string]any{"metadata": map[string]any{"annotations": tmpl}}))
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	if c.DryRun {
		return nil
	}
	err = workload.Patch(ctx, c.clients(), w.Kind, w.Meta.Namespace, w.Meta.Name, b)
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile; the delete event cleans the index
	}
	if what == "rollout" && c.Metrics.OnRolloutWrite != nil && !apierrors.IsConflict(err) {
		c.Metrics.OnRolloutWrite(RolloutWrite{Kind: string(w.Kind), Namespace: w.Meta.Namespace, Name: w.Meta.Name, Changed: rec.Change, OK: err == nil})
	}
	if err != nil {
		return fmt.Errorf("%s: patch (%s): %w", w, what, err)
	}
	c.Metrics.Patches.WithLabelValues(string(w.Kind), what).Inc()
	return nil
}

// revisionsOff says whether the object opts out of revisions (configwave.io/revisions: "false"
// on it): its pods read it live, and its changes are no part of a hold.
func (c *Controller) revisionsOff(ref configref.Ref) bool {
	obj, ok := c.Informers.config(ref)
	m, isMeta := obj.(metav1.Object)
	return ok && isMeta && optsOut(m)
}

// optsOut is revisionsOff's test of an object already read.
func optsOut(m metav1.Object) bool { return m.GetAnnotations()[revisions.OptInAnnotation] == "false" }

// nilIfEmpty is v for a merge patch: null (remove) for "".
func nilIfEmpty(v string) any {
	if v == "" {
		return nil
	}
	return v
}

// ensureRevision makes the snapshots and the index of a revision: of every ConfigMap and Secret
// its pod spec names in the workload's namespace, as the caches have them at the decision,
// except those that opt out (configwave.io/revisions: "false"), those ignored, and optional
// ones that are absent (the pods read those live).
func (c *Controller) ensureRevision(ctx context.Context, w workload.Workload, revision string) error {
	ns := w.Meta.Namespace
	sources := c.revisionSources(w)
	dg := c.Informers.digester
	if len(dg.Key) == 0 {
		// Plain digests of a Secret's values would make a snapshot's name a test of guesses
		// (--install-key-secret ""): its uid and resourceVersion name its content instead.
		dg.SecretsByMetadata = true
	}
	if _, err := revisions.Ensure(ctx, revisions.ClientAPI{Core: c.Client.CoreV1()}, dg, ns, revision, sources); err != nil {
		return fmt.Errorf("keep the config of revision %s: %w", revision, err)
	}
	return nil
}

// revisionSources are the sources a revision of w keeps in snapshots: those its pod spec names
// that are there, not ignored, and not opted out of revisions.
func (c *Controller) revisionSources(w workload.Workload) []revisions.Source {
	var sources []revisions.Source
	for _, ref := range revisions.SourcesOf(w.Meta.Namespace, &w.Template.Spec) {
		obj, ok := c.Informers.config(ref)
		m, isMeta := obj.(metav1.Object)
		if !ok || !isMeta || c.ignored(ref) || optsOut(m) {
			continue
		}
		sources = append(sources, revisions.Source{Ref: ref, ResourceVersion: m.GetResourceVersion()})
	}
	return sources
}

// restoreScheduling puts back the scheduler Wave 0.7 and later set aside while the workload's
// config was missing (see podrefs.SchedulingDisabledAnnotation): the original scheduler back, the
// annotation gone, in one patch conditional on the version read. The pods waiting for a
// scheduler that does not exist are replaced.
func (c *Controller) restoreScheduling(ctx context.Context, w workload.Workload, original string) error {
	var scheduler any // null: the API server's default scheduler
	if original != "" {
		scheduler = original
	}
	patch := workload.TemplatePatch(w.Kind, map[string]any{"spec": map[string]any{"schedulerName": scheduler}})
	patch["metadata"] = map[string]any{"annotations": map[string]any{podrefs.SchedulingDisabledAnnotation: nil}, "resourceVersion": w.Meta.ResourceVersion}
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if c.DryRun {
		return nil
	}
	if err := workload.Patch(ctx, c.clients(), w.Kind, w.Meta.Namespace, w.Meta.Name, body); err != nil {
		return fmt.Errorf("%s: restore the scheduler Wave disabled: %w", w, err)
	}
	return nil
}

// pendingSince is since when w's change waits for approval after d: as d writes the record, or
// as the record stands when d writes none (a hold, a look that finds nothing new).
func pendingSince(w workload.Workload, d decision) time.Time {
	if d.Write != "" {
		return d.Record.PendingSince
	}
	rec, _ := rolloutrecord.ParseRecord(w.Meta.Annotations[rolloutrecord.Annotation])
	return rec.PendingSince
}
