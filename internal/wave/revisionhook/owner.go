package revisionhook

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkloadOf names the workload a pod being created belongs to, from the pod alone (the webhook
// reads nothing to say why a pod reads live): a ReplicaSet's name is its Deployment's or
// Rollout's and the pod's template hash, which the pod carries as a label; a Job of a CronJob
// is the CronJob's name and a number. kind is "" when the pod has no such owner.
func WorkloadOf(pod *corev1.Pod) (kind, name string) {
	owner := metav1.GetControllerOfNoCopy(pod)
	if owner == nil {
		return "", ""
	}
	switch owner.Kind {
	case "ReplicaSet":
		if h := pod.Labels["rollouts-pod-template-hash"]; h != "" {
			if n, ok := strings.CutSuffix(owner.Name, "-"+h); ok {
				return "Rollout", n
			}
		}
		if h := pod.Labels["pod-template-hash"]; h != "" {
			if n, ok := strings.CutSuffix(owner.Name, "-"+h); ok {
				return "Deployment", n
			}
		}
	case "StatefulSet", "DaemonSet":
		return owner.Kind, owner.Name
	case "Job":
		if i := strings.LastIndexByte(owner.Name, '-'); i > 0 && strings.Trim(owner.Name[i+1:], "0123456789") == "" {
			return "CronJob", owner.Name[:i]
		}
	}
	return "", ""
}
