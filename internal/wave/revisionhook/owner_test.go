package revisionhook

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWorkloadOf(t *testing.T) {
	yes := true
	pod := func(kind, name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels, OwnerReferences: []metav1.OwnerReference{{Kind: kind, Name: name, Controller: &yes}}}}
	}
	for _, tc := range []struct {
		name       string
		pod        *corev1.Pod
		kind, want string
	}{
		{"a Deployment's", pod("ReplicaSet", "web-7d9f8c", map[string]string{"pod-template-hash": "7d9f8c"}), "Deployment", "web"},
		{"a Rollout's", pod("ReplicaSet", "web-5b6c", map[string]string{"rollouts-pod-template-hash": "5b6c"}), "Rollout", "web"},
		{"a ReplicaSet of its own", pod("ReplicaSet", "plain", nil), "", ""},
		{"a hash that is not the name's end", pod("ReplicaSet", "web-1", map[string]string{"pod-template-hash": "2"}), "", ""},
		{"a StatefulSet's", pod("StatefulSet", "db", nil), "StatefulSet", "db"},
		{"a DaemonSet's", pod("DaemonSet", "agent", nil), "DaemonSet", "agent"},
		{"a CronJob's Job", pod("Job", "backup-29012345", nil), "CronJob", "backup"},
		{"a Job of its own name", pod("Job", "migrate", nil), "", ""},
		{"no controller", &corev1.Pod{}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, name := WorkloadOf(tc.pod)
			assert.Equal(t, tc.kind, kind)
			assert.Equal(t, tc.want, name)
		})
	}
}
