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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", UID: "uid-app"},
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
	replicaSet := func(hash, revision string) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app-" + hash, Labels: map[string]string{"app": "app", "pod-template-hash": hash},
			Annotations:     map[string]string{"deployment.kubernetes.io/revision": revision},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "app", UID: "uid-app", Controller: &yes}}}}
	}
	podOf := func(name, hash string) *corev1.Pod {
		p := crashing(name, map[string]string{"app": "app", "pod-template-hash": hash})
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "app-" + hash, UID: "rs-" + types.UID(hash), Controller: &yes}}
		return p
	}
	// The config's first ReplicaSet crash-loops, and an image fix made a newer one of the same
	// config: the old pods, scaled down, are no verdict on the fix.
	for _, o := range []runtime.Object{replicaSet("0ld", "2"), replicaSet("5d4f", "3"), podOf("app-0ld-1", "0ld")} {
		require.NoError(t, client.Tracker().Add(o))
	}
	require.NoError(t, cl.check(context.Background(), "Deployment/ns/app"))
	_, found = cl.Of("Deployment/ns/app", "bbb")
	assert.False(t, found, "an older ReplicaSet's pods of the same config do not count")

	made := podOf("app-5d4f-1", "5d4f")
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

func TestOfNewestRevision(t *testing.T) {
	yes := true
	owned := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: "x", Name: "x", UID: uid, Controller: &yes}}
	}
	pod := func(name string, labels map[string]string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	names := func(pods []corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	set := func(kind workload.Kind, name string) workload.Workload {
		return workload.Workload{Kind: kind, Meta: &metav1.ObjectMeta{Name: name, UID: "uid-" + types.UID(name)}}
	}
	rs := func(hash, revision string, uid types.UID, argo bool) appsv1.ReplicaSet {
		label, ann := "pod-template-hash", "deployment.kubernetes.io/revision"
		if argo {
			label, ann = "rollouts-pod-template-hash", "rollout.argoproj.io/revision"
		}
		return appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-" + hash, Labels: map[string]string{label: hash},
			Annotations: map[string]string{ann: revision}, OwnerReferences: owned(uid)}}
	}
	cr := func(name string, revision int64, uid types.UID) appsv1.ControllerRevision {
		return appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owned(uid)}, Revision: revision}
	}
	deployPods := []corev1.Pod{pod("old", map[string]string{"pod-template-hash": "a"}), pod("new", map[string]string{"pod-template-hash": "b"})}
	for _, tc := range []struct {
		name string
		w    workload.Workload
		revs Revisions
		pods []corev1.Pod
		want []string
	}{
		{"a Deployment: only the highest revision's ReplicaSet", set(workload.Deployment, "web"),
			Revisions{ReplicaSets: []appsv1.ReplicaSet{rs("a", "9", "uid-web", false), rs("b", "10", "uid-web", false)}}, deployPods, []string{"new"}},
		{"just restarted: the same lists, the same pods", set(workload.Deployment, "web"),
			Revisions{ReplicaSets: []appsv1.ReplicaSet{rs("b", "10", "uid-web", false), rs("a", "9", "uid-web", false)}}, deployPods, []string{"new"}},
		{"an undo made the older ReplicaSet the newest", set(workload.Deployment, "web"),
			Revisions{ReplicaSets: []appsv1.ReplicaSet{rs("a", "11", "uid-web", false), rs("b", "10", "uid-web", false)}}, deployPods, []string{"old"}},
		{"a ReplicaSet another Deployment controls is no revision of this one", set(workload.Deployment, "web"),
			Revisions{ReplicaSets: []appsv1.ReplicaSet{rs("a", "9", "uid-web", false), rs("b", "99", "uid-other", false)}}, deployPods, []string{"old"}},
		{"no ReplicaSet listed yet: none judged", set(workload.Deployment, "web"), Revisions{}, deployPods, nil},
		{"an Argo Rollout: its own label and revision", set(workload.ArgoRollout, "web"),
			Revisions{ReplicaSets: []appsv1.ReplicaSet{rs("a", "1", "uid-web", true), rs("b", "2", "uid-web", true)}},
			[]corev1.Pod{pod("stable", map[string]string{"rollouts-pod-template-hash": "a"}), pod("canary", map[string]string{"rollouts-pod-template-hash": "b"})}, []string{"canary"}},
		{"a StatefulSet: the pods carry the revision's name", set(workload.StatefulSet, "db"),
			Revisions{ControllerRevisions: []appsv1.ControllerRevision{cr("db-1a", 1, "uid-db"), cr("db-2b", 2, "uid-db")}},
			[]corev1.Pod{pod("db-0", map[string]string{"controller-revision-hash": "db-1a"}), pod("db-1", map[string]string{"controller-revision-hash": "db-2b"})}, []string{"db-1"}},
		{"a DaemonSet: the pods carry the revision's hash", set(workload.DaemonSet, "agent"),
			Revisions{ControllerRevisions: []appsv1.ControllerRevision{cr("agent-1a", 1, "uid-agent"), cr("agent-2b", 2, "uid-agent")}},
			[]corev1.Pod{pod("agent-x", map[string]string{"controller-revision-hash": "1a"}), pod("agent-y", map[string]string{"controller-revision-hash": "2b"})}, []string{"agent-y"}},
		{"a CronJob: every Job's pods", set(workload.CronJob, "nightly"), Revisions{}, deployPods, []string{"old", "new"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, names(ofNewestRevision(tc.w, tc.revs, tc.pods)))
		})
	}
}
