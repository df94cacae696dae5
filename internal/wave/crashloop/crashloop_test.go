package crashloop

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configwave/configwave/internal/wave/workload"

	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

const annotation = "configwave.io/config-inputs-hash"

func TestCrashLooping(t *testing.T) {
	pod := func(name, template string, waiting string, restarts int32) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annotation: template}}}
		cs := corev1.ContainerStatus{Name: "app", RestartCount: restarts}
		if waiting != "" {
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: waiting, Message: "SECRET-IN-APP-OUTPUT"}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		return p
	}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"none", nil, ""},
		{"old pods crash-looping are not this rollout's", []corev1.Pod{pod("old", "aaa", "CrashLoopBackOff", 9)}, ""},
		{"new pods starting", []corev1.Pod{pod("new", "bbb", "ContainerCreating", 0)}, ""},
		{"a new pod crash-loops", []corev1.Pod{pod("old", "aaa", "", 0), pod("new-1", "bbb", "CrashLoopBackOff", 3)},
			`pod new-1 of the new config: container "app" is in CrashLoopBackOff (3 restarts)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := crashLooping(tc.pods, annotation, "bbb")
			assert.Equal(t, tc.want, got)
			assert.NotContains(t, got, "SECRET", "never the container's message: it may be the app's output")
		})
	}
	assert.Empty(t, crashLooping([]corev1.Pod{pod("x", "", "CrashLoopBackOff", 3)}, annotation, ""), "no template annotation: not a rollout of wave's")
}

func TestCrashLoopsCheckListsOnlyTheWorkloadsPods(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "app"}}}}
	d.Spec.Template.Annotations = map[string]string{annotation: "bbb"}
	crashing := func(name string, labels map[string]string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels, Annotations: map[string]string{annotation: "bbb"}}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
		return p
	}
	client := fake.NewSimpleClientset(d, crashing("other-1", map[string]string{"app": "other"}))
	lookup := func(key string) (workload.Workload, bool) {
		if key != "Deployment/ns/app" {
			return workload.Workload{}, false
		}
		return workload.Of(d)
	}
	var woken []string
	cl := New(waveclienttest.Wrap(client), lookup, annotation, func(k string) { woken = append(woken, k) })

	require.NoError(t, cl.check(context.Background(), "Deployment/ns/app"))
	_, found := cl.Of("Deployment/ns/app", "bbb")
	assert.False(t, found, "another workload's pods do not count")

	// A bare pod with the workload's labels and hash annotation (made by someone who may only
	// create pods) does not count: it cannot make wave undo a rollout.
	_, err := client.CoreV1().Pods("ns").Create(context.Background(), crashing("forged", map[string]string{"app": "app", "pod-template-hash": "5d4f"}), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, cl.check(context.Background(), "Deployment/ns/app"))
	_, found = cl.Of("Deployment/ns/app", "bbb")
	assert.False(t, found, "a pod no ReplicaSet of the Deployment controls does not count")

	yes := true
	made := crashing("app-5d4f-1", map[string]string{"app": "app", "pod-template-hash": "5d4f"})
	made.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "app-5d4f", UID: "rs", Controller: &yes}}
	_, err = client.CoreV1().Pods("ns").Create(context.Background(), made, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, cl.check(context.Background(), "Deployment/ns/app"))
	got, found := cl.Of("Deployment/ns/app", "bbb")
	require.True(t, found)
	assert.Contains(t, got.Reason, "pod app-5d4f-1")
	assert.Equal(t, []string{"Deployment/ns/app"}, woken, "the controller looks again")
	_, found = cl.Of("Deployment/ns/app", "ccc")
	assert.False(t, found, "a later rollout starts clean")

	now := time.Now()
	cl.Ask("Deployment/ns/app", now)
	cl.Ask("Deployment/ns/app", now.Add(time.Second))
	assert.Equal(t, 1, cl.queue.Len(), "asked at most every CheckEvery")
}
