package rollout

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/wave/crashloop"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/rolloutwatch"
	"github.com/configwave/configwave/internal/wave/workload"
)

// Status is wave's /status: the rollouts that failed, and when this replica last looked.
type Status struct {
	Leader bool                         `json:"leader"`
	Failed []rolloutwatch.FailedRollout `json:"failedRollouts"`
}

// Leading reports whether this replica reconciles now (it holds the Lease, or there is none).
func (c *Controller) Leading() bool { return c.leading.Load() }

// Status for /status. It names workloads and objects, never a value.
func (c *Controller) Status() any {
	return Status{Leader: c.leading.Load(), Failed: c.follow.FailedRollouts()}
}

// followUp judges w's last config rollout and reports what changed since the last look. An
// error is a write that failed; the caller retries the look with backoff.
func (c *Controller) followUp(ctx context.Context, w workload.Workload) error {
	if w.Progress.Untracked {
		return nil // nothing rolls of this kind (a CronJob): nothing to follow
	}
	key := w.Key()
	rec, err := rolloutrecord.ParseRecord(w.Meta.Annotations[rolloutrecord.Annotation])
	if err != nil {
		c.Recorder.Event(w.Object, corev1.EventTypeWarning, "InvalidAnnotation", err.Error())
		return nil
	}
	rec = rec.AtTemplate(w.Template.Annotations[InputsHashAnnotation])
	now := time.Now()
	if d := rolloutrecord.DueIn(rec, w.Progress, now, c.RolloutDeadline); d > 0 {
		c.queue.AddAfter(key, d) // wave's own deadline: look again when it passes
	}
	if !w.Progress.Observed {
		return nil // its controller has not looked at the current generation yet: nothing to judge
	}
	c.adoptRevision(ctx, w) // its controller made the revision object: it owns its snapshots
	p := w.Progress
	if c.crash != nil {
		if cl, ok := c.crash.Of(key, w.Template.Annotations[InputsHashAnnotation]); ok && !p.Done && p.Failed == "" {
			p.Failed, p.FailedAt = cl.Reason, cl.At
		}
	}
	v := rolloutrecord.Evaluate(rec, p, now, c.RolloutDeadline)
	defer func() {
		if v.State == rolloutrecord.Rolling && c.crash != nil && c.follow.IsOurs(key) {
			c.crash.Ask(key, now) // are the new pods crash-looping?
			c.queue.AddAfter(key, crashloop.CheckEvery)
		}
	}()
	r := c.follow.Transition(key, w.String(), rec, v)
	if c.InFlight.On() && r != rolloutwatch.Nothing { // rolled out, recovered or failed: over
		c.freed(w.Meta.Namespace) // a slot under the in-flight cap is free
	}
	var noteErr error
	if v.State == rolloutrecord.Failed && rec.Failed == "" && c.follow.IsOurs(key) {
		// On record, for `wave status` and a new leader; looked at on every pass until it is
		// there, since the workload's controller often writes its status in between (409).
		failed := rec
		failed.Failed, failed.FailedAt = v.Reason, v.Since.UTC().Truncate(time.Second)
		if err := c.patch(ctx, w, decision{Write: "outcome", Record: failed}); err != nil {
			noteErr = fmt.Errorf("note the failed rollout in the rollout record: %w", err)
		}
	}
	switch r {
	case rolloutwatch.RolledOut, rolloutwatch.Recovered:
		took := now.Sub(rec.Started).Round(100 * time.Millisecond)
		c.Recorder.Eventf(w.Object, corev1.EventTypeNormal, "ConfigRolledOut", "the %s change is rolled out: every pod runs the current config (%s after wave started the rollout)", v.Change, took)
		klog.InfoS("config rolled out", "workload", w.String(), "change", v.Change, "took", took)
		c.Metrics.Rollouts.WithLabelValues(RolloutSucceeded).Inc()
		c.Metrics.RolloutDuration.WithLabelValues(RolloutSucceeded).Observe(now.Sub(rec.Started).Seconds())
		if r == rolloutwatch.Recovered {
			c.alert(fmt.Sprintf("configwave: %s recovered: its pods run the current config (%s).", w, v.Change))
		}
	case rolloutwatch.Failed:
		c.Recorder.Eventf(w.Object, corev1.EventTypeWarning, "ConfigRolloutFailed", "the rollout of the %s change failed: %s; the old pods keep serving. Revert the change, or fix the config: the next change rolls again", v.Change, v.Reason)
		klog.InfoS("config rollout failed", "workload", w.String(), "change", v.Change, "reason", v.Reason)
		c.Metrics.Rollouts.WithLabelValues(RolloutFailed).Inc()
		c.Metrics.RolloutDuration.WithLabelValues(RolloutFailed).Observe(now.Sub(rec.Started).Seconds())
		c.alert(fmt.Sprintf("configwave: the rollout of %s failed after %s changed: %s. The old pods keep serving; revert the change (git revert) or fix the config.", w, v.Change, v.Reason))
		failed := rec
		if failed.Failed == "" {
			failed.Failed, failed.FailedAt = v.Reason, v.Since.UTC().Truncate(time.Second)
		}
		c.rollBackOnFailure(ctx, w, v.Change, failed)
	}
	return noteErr
}

func (c *Controller) alert(text string) {
	if c.Alert != nil {
		c.Alert(text)
	}
}
