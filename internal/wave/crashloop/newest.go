package crashloop

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/wave/workload"
)

// Revisions is what w's controller keeps of its revisions, as listed: a Deployment's or Argo
// Rollout's ReplicaSets, a StatefulSet's or DaemonSet's ControllerRevisions.
type Revisions struct {
	ReplicaSets         []appsv1.ReplicaSet
	ControllerRevisions []appsv1.ControllerRevision
}

// ofNewestRevision keeps the pods of the revision w's controller made last (among those w
// controls, by UID): a Deployment's or Rollout's ReplicaSet of the highest revision number, a
// set's ControllerRevision of the highest revision. The pods of an older revision of the same
// config (an image fixed since: its old pods still crash-loop while they are scaled down) are
// no verdict on the rollout under way; judging them would undo the fix. A CronJob's Jobs are
// all its own.
func ofNewestRevision(w workload.Workload, revs Revisions, pods []corev1.Pod) []corev1.Pod {
	var match func(p *corev1.Pod) bool
	switch w.Kind {
	case workload.Deployment, workload.ArgoRollout:
		label, revision := appsv1.DefaultDeploymentUniqueLabelKey, "deployment.kubernetes.io/revision"
		if w.Kind == workload.ArgoRollout {
			label, revision = "rollouts-pod-template-hash", "rollout.argoproj.io/revision"
		}
		var newest *appsv1.ReplicaSet
		best := int64(-1)
		for i := range revs.ReplicaSets {
			rs := &revs.ReplicaSets[i]
			n, err := strconv.ParseInt(rs.Annotations[revision], 10, 64)
			if err == nil && controls(w, rs) && n > best {
				newest, best = rs, n
			}
		}
		if newest == nil || newest.Labels[label] == "" {
			return nil
		}
		match = func(p *corev1.Pod) bool { return p.Labels[label] == newest.Labels[label] }
	case workload.StatefulSet, workload.DaemonSet:
		var newest *appsv1.ControllerRevision
		for i := range revs.ControllerRevisions {
			cr := &revs.ControllerRevisions[i]
			if controls(w, cr) && (newest == nil || cr.Revision > newest.Revision) {
				newest = cr
			}
		}
		if newest == nil {
			return nil
		}
		// A StatefulSet's pods carry the revision's name, a DaemonSet's its hash after the
		// set's name.
		match = func(p *corev1.Pod) bool {
			h := p.Labels[appsv1.ControllerRevisionHashLabelKey]
			return h != "" && (h == newest.Name || w.Meta.Name+"-"+h == newest.Name)
		}
	default:
		return pods
	}
	var out []corev1.Pod
	for i := range pods {
		if match(&pods[i]) {
			out = append(out, pods[i])
		}
	}
	return out
}

func controls(w workload.Workload, o metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(o)
	return ref != nil && ref.UID == w.Meta.UID
}
