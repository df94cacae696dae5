package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/workload"
)

// Stakater Reloader's pause-period pauses a Deployment (spec.paused, and its paused-at
// annotation saying when) and resumes it from a timer in its own process. A switch to wave
// while one is paused would leave it paused for good: wave holds rollouts for the pause-period
// instead of pausing, so nothing else would resume it. wave finishes Reloader's job: once the
// period has passed, it resumes the Deployment, and the change held meanwhile rolls.

// stakaterResume decides for a workload whether it is a Deployment Reloader paused (paused,
// with Reloader's paused-at annotation) and, if so, how long until its pause-period ends: 0
// resumes now. A user's own spec.paused (no paused-at) is never Reloader's. As in Reloader, a
// paused-at that is not RFC 3339 resumes at once; so does one in the future (Reloader writes
// the time it pauses; the annotation is anyone's to edit) and a pause-period that is gone or
// not a duration, since no timer could ever end them.
func stakaterResume(paused bool, annotations map[string]string, st podrefs.StakaterDialect, now time.Time) (wait time.Duration, reloaders bool) {
	at, ok := annotations[st.PausedAt()]
	if !paused || !ok || at == "" {
		return 0, false
	}
	since, err := time.Parse(time.RFC3339, at)
	if err != nil || since.After(now) {
		return 0, true
	}
	period, err := time.ParseDuration(annotations[st.PausePeriod()])
	if err != nil || period <= 0 {
		return 0, true
	}
	if end := since.Add(period); end.After(now) {
		return end.Sub(now), true
	}
	return 0, true
}

// finishStakaterPause resumes a Deployment Reloader paused once its pause-period is over,
// whether or not it still opts in, in the namespaces Reloader's flags select, and reports
// whether it did; before then, it looks again when the period ends.
func (c *Controller) finishStakaterPause(ctx context.Context, w workload.Workload) (bool, error) {
	// Only where Reloader would have acted: not in an ignored namespace, nor in one its
	// --namespace-selector leaves out.
	if w.Kind != workload.Deployment || !c.Dialects.orDefault().Stakater || c.Reloader.Namespaces[w.Meta.Namespace] || !c.namespaceSelected(w.Meta.Namespace) {
		return false, nil
	}
	wait, reloaders := stakaterResume(w.Progress.Paused, w.Meta.Annotations, c.Reloader.Dialect, time.Now())
	switch {
	case !reloaders:
		return false, nil
	case wait > 0:
		c.queue.AddAfter(w.Key(), wait)
		return false, nil
	}
	return true, c.resumeStakaterPause(ctx, w)
}

// resumeStakaterPause unpauses a Deployment Reloader paused and removes its paused-at mark, as
// Reloader's own resume does, at the resourceVersion it was decided on. The workload is
// looked at again at once: the change held meanwhile then rolls as any other.
func (c *Controller) resumeStakaterPause(ctx context.Context, w workload.Workload) error {
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{c.Reloader.Dialect.PausedAt(): nil}, "resourceVersion": w.Meta.ResourceVersion},
		"spec":     map[string]any{"paused": false},
	})
	if err != nil {
		return err
	}
	if c.DryRun {
		klog.InfoS("dry run: would resume a Deployment Stakater Reloader paused", "workload", w.String())
		return nil
	}
	if err := workload.Patch(ctx, c.clients(), w.Kind, w.Meta.Namespace, w.Meta.Name, body); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("%s: resume the Deployment Stakater Reloader paused: %w", w, err)
	}
	c.Recorder.Eventf(w.Object, corev1.EventTypeNormal, "Resumed", "Stakater Reloader paused this Deployment at %s for its %s; the period is over, so wave resumed it (spec.paused: false)",
		w.Meta.Annotations[c.Reloader.Dialect.PausedAt()], c.Reloader.Dialect.PausePeriod())
	klog.InfoS("resumed a Deployment Stakater Reloader paused", "workload", w.String())
	// Its pause-period is over: the change held meanwhile rolls now, not after a period of its
	// own. A paused-at that never parsed ended at once, as in Reloader.
	since, err := time.Parse(time.RFC3339, w.Meta.Annotations[c.Reloader.Dialect.PausedAt()])
	if err != nil || since.After(time.Now()) {
		since = time.Unix(0, 0)
	}
	c.pace.WantedBefore(w.Key(), since)
	c.queue.Add(w.Key())
	return nil
}
