package workload

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Progress is how far a workload's own controller got with its current pod template, read
// from the workload's status alone (the rules of `kubectl rollout status`).
type Progress struct {
	// Observed: the kind's controller has seen the current generation, so the rest is about
	// the current template. A Deployment's generation moves with its annotations too, so
	// metadata writes make it false for a moment.
	Observed bool
	// Paused: a Deployment's spec.paused; its controller rolls nothing until it is resumed.
	Paused bool
	// Done: the controller has seen the current generation, and every pod it wants runs the
	// current template and is available.
	Done bool
	// Failed is the controller's own verdict that the rollout is stuck (a Deployment past its
	// progressDeadlineSeconds), with its message; "" otherwise.
	Failed string
	// FailedAt is when the controller said so.
	FailedAt time.Time
	// OwnDeadline: the kind's controller reports a stuck rollout itself (Deployments), so wave
	// needs no deadline of its own for it.
	OwnDeadline bool
	// Untracked: a template write rolls nothing of this kind (CronJob), so there is no
	// rollout to follow.
	Untracked bool
}

func deploymentProgress(d *appsv1.Deployment) Progress {
	observed := d.Status.ObservedGeneration >= d.Generation
	p := Progress{Observed: observed, OwnDeadline: d.Spec.ProgressDeadlineSeconds != nil, Paused: d.Spec.Paused}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" && observed {
			p.Failed, p.FailedAt = c.Message, c.LastUpdateTime.Time
		}
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	p.Done = observed && s.UpdatedReplicas >= want && s.Replicas == s.UpdatedReplicas && s.AvailableReplicas >= s.UpdatedReplicas
	return p
}

func statefulSetProgress(s *appsv1.StatefulSet) Progress {
	observed := s.Status.ObservedGeneration >= s.Generation && s.Status.ObservedGeneration > 0
	if s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		// Pods change only when someone deletes them: nothing to follow.
		return Progress{Observed: observed, Done: observed}
	}
	want := int32(1)
	if s.Spec.Replicas != nil {
		want = *s.Spec.Replicas
	}
	st := s.Status
	// Available, not only ready, as a Deployment's rollout is judged: with minReadySeconds a
	// pod that is ready for a moment and then crashes on the new config has not rolled out.
	// (kubectl rollout status looks at ready alone.)
	if !observed || st.ReadyReplicas < want || st.AvailableReplicas < want {
		return Progress{Observed: observed}
	}
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil && *ru.Partition > 0 {
		// A partitioned rollout is done when the pods above the partition run the new revision.
		return Progress{Observed: true, Done: st.UpdatedReplicas >= want-*ru.Partition}
	}
	return Progress{Observed: true, Done: st.UpdateRevision == st.CurrentRevision && st.UpdatedReplicas >= want}
}

func daemonSetProgress(d *appsv1.DaemonSet) Progress {
	observed := d.Status.ObservedGeneration >= d.Generation
	if d.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
		return Progress{Observed: observed, Done: observed}
	}
	s := d.Status
	return Progress{Observed: observed, Done: observed &&
		s.UpdatedNumberScheduled >= s.DesiredNumberScheduled && s.NumberAvailable >= s.DesiredNumberScheduled}
}
