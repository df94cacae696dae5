package rollout

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/crashloop"
	"github.com/configwave/configwave/internal/outcome"
	"github.com/configwave/configwave/internal/workload"
)

// follower turns changes of a workload's outcome.Verdict into Events, the rollouts metric and
// alerts. Only changes it sees happen are reported: a replica that becomes the leader takes
// the verdicts it finds as they are, so a failover never repeats an Event; what it finds
// failed it lists at /status all the same. Only config rollouts are reported: when the pods of
// an up-to-date workload roll again without a new rollout record (someone changed the
// image), that is not wave's to judge.
type follower struct {
	mu     sync.Mutex
	seen   map[string]followed      // workload key -> what was last judged
	failed map[string]FailedRollout // workload key -> the failure, until the workload is up to date
}

type followed struct {
	state   outcome.State
	started time.Time // the rollout record judged
	ours    bool      // the pods roll for that config change
}

// FailedRollout is one entry of /status.
type FailedRollout struct {
	Workload string    `json:"workload"`
	Change   string    `json:"change"`
	Since    time.Time `json:"since"`
	Reason   string    `json:"reason"`
}

func newFollower() *follower {
	return &follower{seen: map[string]followed{}, failed: map[string]FailedRollout{}}
}

// started notes a rollout this replica just wrote, so that its completion is reported even if
// the informer delivers the finished workload without a rolling one in between.
func (f *follower) started(key string, rec outcome.Record) {
	f.mu.Lock()
	f.seen[key] = followed{state: outcome.Rolling, started: rec.Started, ours: true}
	f.mu.Unlock()
}

func (f *follower) isOurs(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[key].ours
}

func (f *follower) forget(key string) {
	f.mu.Lock()
	delete(f.seen, key)
	delete(f.failed, key)
	f.mu.Unlock()
}

// report is what a transition means.
type report int

const (
	reportNothing report = iota
	reportRolledOut
	reportRecovered // rolled out after a failure
	reportFailed
)

// transition records the verdict v on the rollout record rec of w and says what to report.
func (f *follower) transition(key string, w workload.Workload, rec outcome.Record, v outcome.Verdict) report {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev, seen := f.seen[key]
	cur := followed{state: v.State, started: rec.Started, ours: prev.ours}
	switch {
	case !seen:
		cur.ours = v.State == outcome.Rolling || v.State == outcome.Failed // found under way: take it as the config's
	case !rec.Started.Equal(prev.started):
		cur.ours = true // a rollout another replica wrote
	case prev.state == outcome.UpToDate && v.State != outcome.UpToDate:
		cur.ours = false // the pods roll for another reason than config
	}
	f.seen[key] = cur
	_, hadFailed := f.failed[key]
	switch {
	case v.State == outcome.Failed && cur.ours:
		f.failed[key] = FailedRollout{Workload: w.String(), Change: v.Change, Since: v.Since, Reason: v.Reason}
	case v.State == outcome.UpToDate:
		delete(f.failed, key)
	}
	if !seen || prev.state == v.State || !cur.ours && !hadFailed {
		return reportNothing
	}
	switch {
	case v.State == outcome.Failed:
		return reportFailed
	case v.State == outcome.UpToDate && hadFailed:
		return reportRecovered
	case v.State == outcome.UpToDate && prev.ours && prev.state == outcome.Rolling:
		return reportRolledOut
	}
	return reportNothing
}

// Failed lists the workloads whose last config rollout failed, for /status.
func (f *follower) Failed() []FailedRollout {
	f.mu.Lock()
	out := make([]FailedRollout, 0, len(f.failed))
	for _, r := range f.failed {
		out = append(out, r)
	}
	f.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Workload < out[j].Workload })
	return out
}

// Status is wave's /status: the rollouts that failed, and when this replica last looked.
type Status struct {
	Leader bool            `json:"leader"`
	Failed []FailedRollout `json:"failedRollouts"`
}

// Status for /status. It names workloads and objects, never a value.
func (c *Controller) Status() any {
	return Status{Leader: c.leading.Load(), Failed: c.follow.Failed()}
}

// followUp judges w's last config rollout and reports what changed since the last look. An
// error is a write that failed; the caller retries the look with backoff.
func (c *Controller) followUp(ctx context.Context, w workload.Workload) error {
	if w.Progress.Untracked {
		return nil // nothing rolls of this kind (a CronJob): nothing to follow
	}
	key := w.Key()
	rec, err := outcome.ParseRecord(w.Meta.Annotations[outcome.Annotation])
	if err != nil {
		c.Recorder.Event(w.Object, corev1.EventTypeWarning, "InvalidAnnotation", err.Error())
		return nil
	}
	now := time.Now()
	if d := outcome.DueIn(rec, w.Progress, now, c.RolloutDeadline); d > 0 {
		c.queue.AddAfter(key, d) // wave's own deadline: look again when it passes
	}
	if !w.Progress.Observed {
		return nil // its controller has not looked at the current generation yet: nothing to judge
	}
	p := w.Progress
	if c.crash != nil {
		if cl, ok := c.crash.Of(key, w.Template.Annotations[InputsHashAnnotation]); ok && !p.Done && p.Failed == "" {
			p.Failed, p.FailedAt = cl.Reason, cl.At
		}
	}
	v := outcome.Evaluate(rec, p, now, c.RolloutDeadline)
	defer func() {
		if v.State == outcome.Rolling && c.crash != nil && c.follow.isOurs(key) {
			c.crash.Ask(key, now) // are the new pods crash-looping?
			c.queue.AddAfter(key, crashloop.CheckEvery)
		}
	}()
	r := c.follow.transition(key, w, rec, v)
	var noteErr error
	if v.State == outcome.Failed && rec.Failed == "" && c.follow.isOurs(key) {
		// On record, for `wave status` and a new leader; looked at on every pass until it is
		// there, since the workload's controller often writes its status in between (409).
		failed := rec
		failed.Failed, failed.FailedAt = v.Reason, v.Since.UTC().Truncate(time.Second)
		if err := c.patch(ctx, w, "outcome", nil, failed, "", ""); err != nil {
			noteErr = fmt.Errorf("note the failed rollout in the rollout record: %w", err)
		}
	}
	switch r {
	case reportRolledOut, reportRecovered:
		took := now.Sub(rec.Started).Round(100 * time.Millisecond)
		c.Recorder.Eventf(w.Object, corev1.EventTypeNormal, "ConfigRolledOut", "the %s change is rolled out: every pod runs the current config (%s after wave started the rollout)", v.Change, took)
		klog.InfoS("config rolled out", "workload", w.String(), "change", v.Change, "took", took)
		c.Metrics.Rollouts.WithLabelValues(RolloutSucceeded).Inc()
		if r == reportRecovered {
			c.alert(fmt.Sprintf("configwave: %s recovered: its pods run the current config (%s).", w, v.Change))
		}
	case reportFailed:
		c.Recorder.Eventf(w.Object, corev1.EventTypeWarning, "ConfigRolloutFailed", "the rollout of the %s change failed: %s; the old pods keep serving. Revert the change, or fix the config: the next change rolls again", v.Change, v.Reason)
		klog.InfoS("config rollout failed", "workload", w.String(), "change", v.Change, "reason", v.Reason)
		c.Metrics.Rollouts.WithLabelValues(RolloutFailed).Inc()
		c.alert(fmt.Sprintf("configwave: the rollout of %s failed after %s changed: %s. The old pods keep serving; revert the change (git revert) or fix the config.", w, v.Change, v.Reason))
	}
	return noteErr
}

func (c *Controller) alert(text string) {
	if c.Alert != nil {
		c.Alert(text)
	}
}
