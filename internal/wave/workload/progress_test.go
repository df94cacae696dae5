package workload

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestProgress(t *testing.T) {
	three := int32(3)
	deadline := int32(600)
	dep := func(gen, observed int64, st appsv1.DeploymentStatus) *appsv1.Deployment {
		st.ObservedGeneration = observed
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Spec: appsv1.DeploymentSpec{Replicas: &three, ProgressDeadlineSeconds: &deadline}, Status: st}
	}
	stuck := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "app-7c9" has timed out progressing.`}
	sts := func(gen, observed int64, st appsv1.StatefulSetStatus, strategy appsv1.StatefulSetUpdateStrategy) *appsv1.StatefulSet {
		st.ObservedGeneration = observed
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Spec: appsv1.StatefulSetSpec{Replicas: &three, UpdateStrategy: strategy}, Status: st}
	}
	rolling := appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
	partition := int32(2)
	partitioned := appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &partition}}
	ds := func(gen, observed int64, st appsv1.DaemonSetStatus) *appsv1.DaemonSet {
		st.ObservedGeneration = observed
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}}, Status: st}
	}
	for _, tc := range []struct {
		name string
		obj  any
		want Progress
	}{
		{"deployment: new generation not seen yet", dep(2, 1, appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}), Progress{OwnDeadline: true}},
		{"deployment: new pods still coming", dep(2, 2, appsv1.DeploymentStatus{Replicas: 4, UpdatedReplicas: 1, AvailableReplicas: 3}), Progress{Observed: true, OwnDeadline: true}},
		{"deployment: old pods still terminating", dep(2, 2, appsv1.DeploymentStatus{Replicas: 4, UpdatedReplicas: 3, AvailableReplicas: 3}), Progress{Observed: true, OwnDeadline: true}},
		{"deployment: new pods not available", dep(2, 2, appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 2}), Progress{Observed: true, OwnDeadline: true}},
		{"deployment: done", dep(2, 2, appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}), Progress{Observed: true, Done: true, OwnDeadline: true}},
		{"deployment: past its deadline", dep(2, 2, appsv1.DeploymentStatus{Replicas: 4, UpdatedReplicas: 1, AvailableReplicas: 3, Conditions: []appsv1.DeploymentCondition{stuck}}),
			Progress{Observed: true, Failed: stuck.Message, OwnDeadline: true}},
		{"deployment: a deadline of an older generation", dep(3, 2, appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{stuck}}), Progress{OwnDeadline: true}},
		{"statefulset: not seen", sts(2, 1, appsv1.StatefulSetStatus{ReadyReplicas: 3}, rolling), Progress{}},
		{"statefulset: revisions differ", sts(2, 2, appsv1.StatefulSetStatus{ReadyReplicas: 3, UpdatedReplicas: 1, CurrentRevision: "a", UpdateRevision: "b"}, rolling), Progress{Observed: true}},
		{"statefulset: a pod not ready", sts(2, 2, appsv1.StatefulSetStatus{ReadyReplicas: 2, AvailableReplicas: 2, UpdatedReplicas: 3, CurrentRevision: "b", UpdateRevision: "b"}, rolling), Progress{Observed: true}},
		{"statefulset: ready, not yet available (minReadySeconds)", sts(2, 2, appsv1.StatefulSetStatus{ReadyReplicas: 3, AvailableReplicas: 2, UpdatedReplicas: 3, CurrentRevision: "b", UpdateRevision: "b"}, rolling), Progress{Observed: true}},
		{"statefulset: done", sts(2, 2, appsv1.StatefulSetStatus{ReadyReplicas: 3, AvailableReplicas: 3, UpdatedReplicas: 3, CurrentRevision: "b", UpdateRevision: "b"}, rolling), Progress{Observed: true, Done: true}},
		{"statefulset: partition reached", sts(2, 2, appsv1.StatefulSetStatus{ReadyReplicas: 3, AvailableReplicas: 3, UpdatedReplicas: 1, CurrentRevision: "a", UpdateRevision: "b"}, partitioned), Progress{Observed: true, Done: true}},
		{"statefulset: OnDelete is not followed", sts(2, 2, appsv1.StatefulSetStatus{}, appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}), Progress{Observed: true, Done: true}},
		{"daemonset: pods not updated", ds(2, 2, appsv1.DaemonSetStatus{DesiredNumberScheduled: 4, UpdatedNumberScheduled: 2, NumberAvailable: 4}), Progress{Observed: true}},
		{"daemonset: not available", ds(2, 2, appsv1.DaemonSetStatus{DesiredNumberScheduled: 4, UpdatedNumberScheduled: 4, NumberAvailable: 3}), Progress{Observed: true}},
		{"daemonset: done", ds(2, 2, appsv1.DaemonSetStatus{DesiredNumberScheduled: 4, UpdatedNumberScheduled: 4, NumberAvailable: 4}), Progress{Observed: true, Done: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, ok := Of(tc.obj)
			assert.True(t, ok)
			assert.Equal(t, tc.want, w.Progress)
		})
	}
}
