package rollout

import (
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/outcome"
	"github.com/configwave/configwave/internal/workload"
)

// follower turns changes of a workload's outcome.Verdict into Events, the rollouts metric and
// alerts. Only changes it sees happen are reported: a replica that becomes the leader takes
// the verdicts it finds as they are, so a failover never repeats an Event; what it finds
// failed it lists at /status all the same.
type follower struct {
	mu     sync.Mutex
	seen   map[string]outcome.State // workload key -> the verdict last seen
	failed map[string]FailedRollout // workload key -> the failure, until the workload is up to date
}

// FailedRollout is one entry of /status.
type FailedRollout struct {
	Workload string    `json:"workload"`
	Change   string    `json:"change"`
	Since    time.Time `json:"since"`
	Reason   string    `json:"reason"`
}

func newFollower() *follower {
	return &follower{seen: map[string]outcome.State{}, failed: map[string]FailedRollout{}}
}

// started notes a rollout this replica just wrote, so that its completion is reported even if
// the informer delivers the finished workload without a rolling one in between.
func (f *follower) started(key string) {
	f.mu.Lock()
	f.seen[key] = outcome.Rolling
	f.mu.Unlock()
}

func (f *follower) forget(key string) {
	f.mu.Lock()
	delete(f.seen, key)
	delete(f.failed, key)
	f.mu.Unlock()
}

// transition records v for key and returns the state it left, whether that is news (false the
// first time key is seen, or when the state did not change), and whether the workload had
// failed before (a fix by hand passes through rolling on its way up to date).
func (f *follower) transition(key string, w workload.Workload, v outcome.Verdict) (from outcome.State, news, hadFailed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev, seen := f.seen[key]
	_, hadFailed = f.failed[key]
	f.seen[key] = v.State
	if v.State == outcome.Failed {
		f.failed[key] = FailedRollout{Workload: w.String(), Change: v.Change, Since: v.Since, Reason: v.Reason}
	} else if v.State == outcome.UpToDate {
		delete(f.failed, key)
	}
	return prev, seen && prev != v.State, hadFailed
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

// followUp judges w's last config rollout and reports what changed since the last look.
func (c *Controller) followUp(w workload.Workload) {
	key := w.Key()
	rec, err := outcome.ParseRecord(w.Meta.Annotations[outcome.Annotation])
	if err != nil {
		c.Recorder.Event(w.Object, corev1.EventTypeWarning, "InvalidAnnotation", err.Error())
		return
	}
	now := time.Now()
	v := outcome.Evaluate(rec, w.Progress, now, c.RolloutDeadline)
	if d := outcome.DueIn(rec, w.Progress, now, c.RolloutDeadline); d > 0 {
		c.queue.AddAfter(key, d) // wave's own deadline: look again when it passes
	}
	from, news, hadFailed := c.follow.transition(key, w, v)
	if !news {
		return
	}
	switch {
	case v.State == outcome.UpToDate && (from == outcome.Rolling || from == outcome.Failed):
		took := now.Sub(rec.Started).Round(100 * time.Millisecond)
		c.Recorder.Eventf(w.Object, corev1.EventTypeNormal, "ConfigRolledOut", "the %s change is rolled out: every pod runs the current config (%s after wave started the rollout)", v.Change, took)
		klog.InfoS("config rolled out", "workload", w.String(), "change", v.Change, "took", took)
		c.Metrics.Rollouts.WithLabelValues(RolloutSucceeded).Inc()
		if hadFailed {
			c.alert(fmt.Sprintf("configwave: %s recovered: its pods run the current config (%s).", w, v.Change))
		}
	case v.State == outcome.Failed:
		c.Recorder.Eventf(w.Object, corev1.EventTypeWarning, "ConfigRolloutFailed", "the rollout of the %s change failed: %s; the old pods keep serving. Revert the change, or fix the config: the next change rolls again", v.Change, v.Reason)
		klog.InfoS("config rollout failed", "workload", w.String(), "change", v.Change, "reason", v.Reason)
		c.Metrics.Rollouts.WithLabelValues(RolloutFailed).Inc()
		c.alert(fmt.Sprintf("configwave: the rollout of %s failed after %s changed: %s. The old pods keep serving; revert the change (git revert) or fix the config.", w, v.Change, v.Reason))
	}
}

func (c *Controller) alert(text string) {
	if c.Alert != nil {
		c.Alert(text)
	}
}
