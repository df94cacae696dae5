package autorollback

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configwave/configwave/internal/wave/revisions"
)

const hashKey = "configwave.io/config-inputs-hash"

var revA, revB, revC, revD = revisions.InputsHash("a"), revisions.InputsHash("b"), revisions.InputsHash("c"), revisions.InputsHash("d")

// webUID is the Deployment's UID; rs makes ReplicaSets it controls.
const webUID = "uid-web"

func rs(name, revision, hash string) appsv1.ReplicaSet {
	yes := true
	return appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{revisionAnnotation: revision, "configwave.io/config-inputs": "record of " + name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: webUID, Controller: &yes}}},
		Spec: appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
			Labels: map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: name}, Annotations: map[string]string{hashKey: hash}}}},
	}
}

func TestPrevious(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: webUID, Annotations: map[string]string{revisionAnnotation: "4"}}}
	ofAnother := rs("c", "3", revC)
	ofAnother.OwnerReferences[0].UID = "uid-of-a-web-deleted-before"
	for _, tc := range []struct {
		name   string
		rss    []appsv1.ReplicaSet
		gone   map[string]bool // revisions whose index or snapshots are gone
		want   string
		errHas string
	}{
		{"not to a ReplicaSet of another Deployment of the same name (matched by UID)", []appsv1.ReplicaSet{rs("b", "2", revB), ofAnother, rs("d", "4", revD)}, nil, "b", ""},
		{"past a revision whose config is gone: its pods would start on the failed live config", []appsv1.ReplicaSet{rs("b", "2", revB), rs("c", "3", revC), rs("d", "4", revD)},
			map[string]bool{revC: true}, "b", ""},
		{"none whose config is kept: said, with why", []appsv1.ReplicaSet{rs("c", "3", revC), rs("d", "4", revD)}, map[string]bool{revC: true}, "", "revision 3: its index is gone"},
		{"the revision before", []appsv1.ReplicaSet{rs("a", "1", revA), rs("b", "2", revB), rs("c", "3", revC), rs("d", "4", revD)}, nil, "c", ""},
		{"past one of the same failed config (undone and redone)", []appsv1.ReplicaSet{rs("b", "2", revB), rs("c", "3", revD), rs("d", "4", revD)}, nil, "b", ""},
		{"not to one from before revisions: it would start on the failed live config", []appsv1.ReplicaSet{rs("a", "1", "0123456789abcdef"), rs("d", "4", revD)}, nil, "", "no revision before 4"},
		{"none before", []appsv1.ReplicaSet{rs("d", "4", revD)}, nil, "", "no revision before 4"},
		{"a ReplicaSet without a number is not one", []appsv1.ReplicaSet{rs("x", "", revC), rs("d", "4", revD)}, nil, "", "no revision before 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			usable := func(hash string, _ *corev1.PodTemplateSpec) error {
				if tc.gone[hash] {
					return fmt.Errorf("its index is gone: %w", ErrConfigGone)
				}
				return nil
			}
			got, err := Previous(d, tc.rss, hashKey, revD, usable)
			if tc.errHas != "" {
				assert.ErrorContains(t, err, tc.errHas)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.Name)
		})
	}
	_, err := Previous(&appsv1.Deployment{}, nil, hashKey, revD, func(string, *corev1.PodTemplateSpec) error { return nil })
	assert.ErrorContains(t, err, "no revision number")
	// A read that failed for a reason of its own (a timeout) says nothing of the config: the
	// undo stops, to be decided again, and never goes further back for it.
	_, err = Previous(d, []appsv1.ReplicaSet{rs("b", "2", revB), rs("c", "3", revC), rs("d", "4", revD)}, hashKey, revD,
		func(hash string, _ *corev1.PodTemplateSpec) error {
			if hash == revC {
				return errors.New("the API server did not answer in time")
			}
			return nil
		})
	assert.EqualError(t, err, "the API server did not answer in time")
}

func TestUndoPatch(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "77", Annotations: map[string]string{
		revisionAnnotation: "4", corev1.LastAppliedConfigAnnotation: "{...}", "configwave.io/config-inputs": "the failed record"}}}
	prev := rs("c", "3", revC)
	b, err := UndoPatch(d, &prev, map[string]string{"configwave.io/rollout": "note"})
	require.NoError(t, err)
	var ops []struct {
		Op, Path string
		Value    json.RawMessage
	}
	require.NoError(t, json.Unmarshal(b, &ops))
	require.Len(t, ops, 3)
	assert.Equal(t, "test", ops[0].Op)
	assert.JSONEq(t, `"77"`, string(ops[0].Value), "a Deployment changed since it was read is not undone")
	var tmpl corev1.PodTemplateSpec
	require.NoError(t, json.Unmarshal(ops[1].Value, &tmpl))
	assert.Equal(t, revC, tmpl.Annotations[hashKey])
	assert.NotContains(t, tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	var ann map[string]string
	require.NoError(t, json.Unmarshal(ops[2].Value, &ann))
	assert.Equal(t, map[string]string{revisionAnnotation: "4", corev1.LastAppliedConfigAnnotation: "{...}", "configwave.io/config-inputs": "record of c",
		"configwave.io/rollout": "note"}, ann,
		"the ReplicaSet's annotations, and the Deployment's own bookkeeping, as kubectl's undo, and wave's note of the undo")
}

func TestRefusal(t *testing.T) {
	d := func(paused bool, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: appsv1.DeploymentSpec{Paused: paused},
			Status: appsv1.DeploymentStatus{Conditions: conds}}
	}
	assert.Empty(t, Refusal(d(false, appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"})),
		"a missed deadline with pods made: the config's fault, as far as anyone can tell")
	assert.Contains(t, Refusal(d(true)), "is paused, and kubectl refuses to undo a paused Deployment: resume it (kubectl rollout resume deployment/web -n shop)")
	assert.Contains(t, Refusal(d(false, appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate",
		Message: "exceeded quota: pods"})), "could not create its pods (FailedCreate: exceeded quota: pods), which is no fault of its config")
}

func TestStillFailed(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: webUID}}
	d.Spec.Template = rs("d", "4", revD).Spec.Template
	delete(d.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	rss := []appsv1.ReplicaSet{rs("c", "3", revC), rs("d", "4", revD)}
	assert.NoError(t, StillFailed(d, rss, hashKey, revD), "the template of the failed ReplicaSet: undone")

	fixed := d.DeepCopy()
	fixed.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "app:fixed"}}
	assert.ErrorContains(t, StillFailed(fixed, rss, hashKey, revD), "its pod template changed since the rollout was judged to have failed", "an image fixed since is not thrown away")
	assert.ErrorContains(t, StillFailed(d, rss[:1], hashKey, revD), "no ReplicaSet of the failed config yet")
	other := d.DeepCopy()
	other.Spec.Template.Annotations = map[string]string{hashKey: revC}
	assert.ErrorContains(t, StillFailed(other, rss, hashKey, revD), "no longer of the failed config")
}

// A rollout that missed its deadline because its new pods found no room is not undone: the
// capacity is at fault, not the config (before, it was undone). A pod of it that ran and
// failed makes it the config's again.
func TestUnschedulable(t *testing.T) {
	yes := true
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "d"}}
	rs := func(uid, hash string) appsv1.ReplicaSet {
		return appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), OwnerReferences: []metav1.OwnerReference{{UID: "d", Controller: &yes}}},
			Spec: appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"h": hash}}}}}
	}
	rss := []appsv1.ReplicaSet{rs("old", "rev-good"), rs("new", "rev-bad")}
	// pod: "unschedulable", "ready", or placed and not ready ("waiting": a missing key, a crash).
	pod := func(name, owner, state string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{UID: types.UID(owner), Controller: &yes}}}}
		switch state {
		case "unschedulable":
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		case "ready":
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		default:
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"new pods found no room: not undone", []corev1.Pod{pod("web-new-1", "new", "unschedulable"), pod("web-old-1", "old", "waiting")}, "its new pods could not be scheduled (web-new-1: no room on any node)"},
		{"one found no room, another is Ready on it: not undone", []corev1.Pod{pod("web-new-1", "new", "unschedulable"), pod("web-new-2", "new", "ready")}, "(web-new-1: no room"},
		{"one found no room, another placed and not Ready (a missing key, a crash): the config's", []corev1.Pod{pod("web-new-1", "new", "unschedulable"), pod("web-new-2", "new", "waiting")}, ""},
		{"an old pod unschedulable says nothing of the new config", []corev1.Pod{pod("web-old-1", "old", "unschedulable")}, ""},
		{"just restarted, no pods listed: the other checks decide", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Unschedulable(d, rss, tc.pods, "h", "rev-bad")
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tc.want)
			assert.Contains(t, got, "deployment shop/web")
		})
	}
}
