package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
	"github.com/configwave/configwave/internal/wave/workload"
)

// A StatefulSet or DaemonSet is undone to the ControllerRevision before the failed one, as
// kubectl rollout undo applies it; an OrderedReady StatefulSet's pod that is not ready on the
// failed revision is deleted once its controller has taken the undo, and no other pod.
func TestUndoToControllerRevision(t *testing.T) {
	revA, revC, revD := revisions.InputsHash("a"), revisions.InputsHash("c"), revisions.InputsHash("d")
	template := func(hash string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}, Annotations: map[string]string{InputsHashAnnotation: hash}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
	}
	for _, tc := range []struct {
		name        string
		kind        workload.Kind
		policy      appsv1.PodManagementPolicyType
		wantDeleted []string
		refused     bool // the pod's delete is refused (a policy, RBAC)
	}{
		{"daemonset", workload.DaemonSet, "", nil, false},
		{"statefulset, parallel: its controller replaces the pods itself", workload.StatefulSet, appsv1.ParallelPodManagement, nil, false},
		{"statefulset, ordered ready", workload.StatefulSet, appsv1.OrderedReadyPodManagement, []string{"db-1"}, false},
		{"statefulset, ordered ready, the delete refused: the undo stands, and the Event says what to do", workload.StatefulSet, appsv1.OrderedReadyPodManagement, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uid := types.UID("uid-db")
			meta := metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: uid, ResourceVersion: "7", Generation: 3}
			sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
			var obj runtime.Object
			if tc.kind == workload.DaemonSet {
				obj = &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: sel, Template: template(revD)}}
			} else {
				obj = &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Selector: sel, Template: template(revD), PodManagementPolicy: tc.policy},
					Status: appsv1.StatefulSetStatus{ObservedGeneration: 3, UpdateRevision: "db-d"}}
			}
			controlled := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: string(tc.kind), Name: "db", UID: uid, Controller: new(true)}}
			cr := func(name string, revision int64, hash string, owners []metav1.OwnerReference) *appsv1.ControllerRevision {
				// as the controllers write it: the template, replacing the set's whole
				b, err := json.Marshal(template(hash))
				require.NoError(t, err)
				var tmpl map[string]any
				require.NoError(t, json.Unmarshal(b, &tmpl))
				tmpl["$patch"] = "replace"
				raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl}})
				require.NoError(t, err)
				return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": "db"}, OwnerReferences: owners},
					Revision: revision, Data: runtime.RawExtension{Raw: raw}}
			}
			other := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: string(tc.kind), Name: "db", UID: "an-older-db", Controller: new(true)}}
			pod := func(name, revision string, ready bool) *corev1.Pod {
				status := map[bool]corev1.ConditionStatus{true: corev1.ConditionTrue, false: corev1.ConditionFalse}[ready]
				return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), OwnerReferences: controlled,
					Labels: map[string]string{"app": "db", appsv1.ControllerRevisionHashLabelKey: revision}},
					Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}}
			}
			// The revisions' config kept: their indexes, wave's (of no source, so no snapshot to
			// find); a ConfigMap under an index's name that is not wave's does not count.
			index := func(hash string) *corev1.ConfigMap {
				immutable := true
				return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: revisions.IndexName(hash),
					Labels: map[string]string{revisions.ManagedByLabel: revisions.ManagedBy}, Annotations: map[string]string{revisions.ContentAnnotation: hash}}, Immutable: &immutable}
			}
			client := fake.NewSimpleClientset(obj, index(revA), index(revC),
				cr("db-a", 1, revA, controlled), cr("db-c", 2, revC, controlled), cr("db-d", 3, revD, controlled),
				cr("db-x", 9, revA, other), // of another object of that name, gone: not this one's history
				pod("db-0", "db-d", true), pod("db-1", "db-d", false), pod("db-2", "db-c", false))
			// The set's controller takes the undo a moment after the patch: until then its
			// status names the failed revision, and no pod may be deleted.
			patched, sawOld := false, false
			client.PrependReactor("patch", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
				patched = true
				return false, nil, nil
			})
			client.PrependReactor("get", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
				o, err := client.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("statefulsets"), "ns", "db")
				require.NoError(t, err)
				s := o.(*appsv1.StatefulSet).DeepCopy()
				if patched && sawOld {
					s.Status.UpdateRevision = "db-c"
				}
				sawOld = sawOld || patched
				return true, s, nil
			})
			client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				s, err := client.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("statefulsets"), "ns", "db")
				require.NoError(t, err)
				assert.Equal(t, revC, s.(*appsv1.StatefulSet).Spec.Template.Annotations[InputsHashAnnotation], "a pod deleted before the undo was written")
				assert.True(t, sawOld, "a pod deleted before the set's controller took the undo")
				if tc.refused {
					return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "db-1", errors.New("refused"))
				}
				return false, nil, nil
			})
			recorder := record.NewFakeRecorder(10)
			c, err := NewController(Config{Client: waveclienttest.Wrap(client), Informers: NewInformers(workload.Clients{Kube: waveclienttest.Wrap(client)}, workload.Builtin(), []string{"ns"}, labels.Everything(), time.Minute, confighash.Digester{}),
				Recorder: recorder, Metrics: testMetrics()})
			require.NoError(t, err)
			w, ok := workload.Of(obj)
			require.True(t, ok)

			to, err := c.undo(context.Background(), w, revD, map[string]string{"configwave.io/rollout": "note"})
			require.NoError(t, err)
			assert.Contains(t, to, "revision 2, ControllerRevision db-c")
			for _, a := range client.Actions() {
				if p, ok := a.(k8stesting.PatchActionImpl); ok && (p.Resource.Resource == "statefulsets" || p.Resource.Resource == "daemonsets") {
					assert.Equal(t, UndoFieldManager, p.PatchOptions.FieldManager, "the undo's own field manager, which a GitOps tool does not ignore")
				}
			}
			var got corev1.PodTemplateSpec
			if tc.kind == workload.DaemonSet {
				d, err := client.AppsV1().DaemonSets("ns").Get(context.Background(), "db", metav1.GetOptions{})
				require.NoError(t, err)
				got = d.Spec.Template
			} else {
				s, err := client.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("statefulsets"), "ns", "db")
				require.NoError(t, err)
				got = s.(*appsv1.StatefulSet).Spec.Template
			}
			assert.Equal(t, template(revC), got, "the template of the revision before, whole")
			o, err := client.Tracker().Get(appsv1.SchemeGroupVersion.WithResource(strings.ToLower(string(tc.kind))+"s"), "ns", "db")
			require.NoError(t, err)
			assert.Equal(t, "note", o.(metav1.Object).GetAnnotations()["configwave.io/rollout"], "wave's note of the undo, written with it")
			pods, err := client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			left := map[string]bool{}
			for _, p := range pods.Items {
				left[p.Name] = true
			}
			for _, name := range []string{"db-0", "db-1", "db-2"} {
				deleted := assert.ObjectsAreEqual([]string{name}, tc.wantDeleted)
				assert.Equal(t, !deleted, left[name], name)
			}
			if tc.wantDeleted != nil {
				assert.Contains(t, to, "deleted pod db-1, not available on the failed config")
			}
			if tc.refused {
				require.Len(t, recorder.Events, 1)
				ev := <-recorder.Events
				assert.Contains(t, ev, "Warning RollbackIncomplete")
				assert.Contains(t, ev, "kubectl delete pod -n ns db-1", "names the pod, its namespace and what to do")
			} else {
				assert.Empty(t, recorder.Events)
			}
		})
	}
}

// Without a revision to go back to, nothing is written, and the error names the object and
// what to do.
func TestUndoToControllerRevisionWithoutOneBefore(t *testing.T) {
	revD := revisions.InputsHash("d")
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "agent", UID: "u", ResourceVersion: "7"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}, Annotations: map[string]string{InputsHashAnnotation: revD}}}}}
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": ds.Spec.Template}})
	require.NoError(t, err)
	client := fake.NewSimpleClientset(ds, &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "agent-d", Labels: map[string]string{"app": "agent"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "u", Controller: new(true)}}}, Revision: 1, Data: runtime.RawExtension{Raw: raw}})
	c, err := NewController(Config{Client: waveclienttest.Wrap(client), Informers: NewInformers(workload.Clients{Kube: waveclienttest.Wrap(client)}, workload.Builtin(), []string{"ns"}, labels.Everything(), time.Minute, confighash.Digester{}),
		Recorder: record.NewFakeRecorder(10), Metrics: testMetrics()})
	require.NoError(t, err)
	w, _ := workload.Of(ds)
	_, err = c.undo(context.Background(), w, revD, map[string]string{"configwave.io/rollout": "note"})
	assert.ErrorContains(t, err, "daemonset/agent -n ns has no revision before 1")
	assert.ErrorContains(t, err, "undo it by hand")
	for _, a := range client.Actions() {
		assert.NotEqual(t, "patch", a.GetVerb(), "nothing written")
	}
}

// A pod of a revision reads live what its spec names by the source's own name where the
// revision's index has a snapshot; one pointed at its snapshots, or a source opted out (not in
// the index), reads nothing live.
func TestReadsLive(t *testing.T) {
	snaps := revisions.Snapshots{
		{Kind: "ConfigMap", Namespace: "ns", Name: "app"}: "app-0123456789",
		{Kind: "Secret", Namespace: "ns", Name: "db"}:     "db-0123456789",
	}
	pod := func(cm, secret string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}}},
			Volumes:    []corev1.Volume{{Name: "db", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}}}}
	}
	assert.Equal(t, []string{"configmap/app", "secret/db"}, readsLive(pod("app", "db"), snaps), "made while the webhook did not answer")
	assert.Empty(t, readsLive(pod("app-0123456789", "db-0123456789"), snaps), "pointed at its snapshots")
	assert.Equal(t, []string{"configmap/app"}, readsLive(pod("app", "db-0123456789"), snaps))
	assert.Empty(t, readsLive(pod("other", "rotated"), snaps), "sources with no snapshot (opted out) are read live by design")
}

// An Argo Rollout is aborted as `kubectl argo rollouts abort` does, read afresh and tested
// against the version read: one whose spec changed since the rollout was judged (an image
// fixed) is left as it is (before, the abort was sent blind and threw the fix away).
func TestUndoAbortsAnArgoRolloutOnlyAsJudged(t *testing.T) {
	failed := revisions.InputsHash("bad")
	for _, tc := range []struct {
		name       string
		generation int64 // the Rollout's now; judged at 4
		already    bool  // aborted already (by its analysis)
		aborted    bool
	}{
		{"as judged: aborted", 4, false, true},
		{"an image fixed since: left as it is", 5, false, false},
		{"aborted already by its analysis: the undo stands as it is, nothing written", 4, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
				"metadata": map[string]any{"namespace": "ns", "name": "web", "generation": tc.generation, "resourceVersion": "9"},
				"spec":     map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": map[string]any{InputsHashAnnotation: failed}}}}}}
			if tc.already {
				r.Object["status"] = map[string]any{"abort": true}
			}
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{argoRollouts: "RolloutList"}, r)
			client := fake.NewSimpleClientset()
			c, err := NewController(Config{Client: waveclienttest.Wrap(client), Dynamic: dyn,
				Informers: NewInformers(workload.Clients{Kube: waveclienttest.Wrap(client)}, workload.Builtin(), []string{"ns"}, labels.Everything(), time.Minute, confighash.Digester{}),
				Recorder:  record.NewFakeRecorder(10), Metrics: testMetrics()})
			require.NoError(t, err)
			w := workload.Workload{Kind: workload.ArgoRollout, Meta: &metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: 4}}
			_, err = c.undo(context.Background(), w, failed, map[string]string{"configwave.io/rollout": "note"})
			got, getErr := dyn.Resource(argoRollouts).Namespace("ns").Get(context.Background(), "web", metav1.GetOptions{})
			require.NoError(t, getErr)
			aborted, _, _ := unstructured.NestedBool(got.Object, "status", "abort")
			assert.Equal(t, tc.aborted, aborted)
			if tc.aborted {
				assert.Equal(t, "note", got.GetAnnotations()["configwave.io/rollout"], "wave's note of the undo")
			}
			if tc.aborted {
				assert.NoError(t, err)
				for _, a := range dyn.Actions() {
					p, ok := a.(k8stesting.PatchActionImpl)
					if !ok {
						continue
					}
					assert.Equal(t, UndoFieldManager, p.PatchOptions.FieldManager)
					if p.Subresource == "status" {
						assert.False(t, tc.already, "no abort written over an abort already made")
						assert.Contains(t, string(p.Patch), `"resourceVersion":"9"`, "tested against the version read")
					}
				}
			} else {
				assert.ErrorContains(t, err, "its spec changed since the rollout was judged to have failed")
			}
		})
	}
}
