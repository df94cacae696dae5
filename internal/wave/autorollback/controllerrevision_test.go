package autorollback

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// cr is a ControllerRevision as the StatefulSet and DaemonSet controllers write it.
func cr(name string, revision int64, hash string) appsv1.ControllerRevision {
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{
		"metadata": map[string]any{"labels": map[string]string{"app": "db"}, "annotations": map[string]string{hashKey: hash}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": "app:1"}}},
		"$patch":   "replace",
	}}})
	if err != nil {
		panic(err)
	}
	return appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name}, Revision: revision, Data: runtime.RawExtension{Raw: raw}}
}

func TestPreviousRevision(t *testing.T) {
	garbled := cr("g", 2, revB)
	garbled.Data.Raw = []byte("{not json")
	for _, tc := range []struct {
		name          string
		crs           []appsv1.ControllerRevision
		want, wantBad string
		errHas        string
	}{
		{"the revision before, in any order", []appsv1.ControllerRevision{cr("d", 4, revD), cr("b", 2, revB), cr("c", 3, revC), cr("a", 1, revA)}, "c", "d", ""},
		{"past one of the same failed config", []appsv1.ControllerRevision{cr("b", 2, revB), cr("c", 3, revD), cr("d", 4, revD)}, "b", "d", ""},
		{"the failed template taken up again keeps its ControllerRevision, at a new number", []appsv1.ControllerRevision{cr("d", 5, revD), cr("c", 4, revC), cr("b", 2, revB)}, "c", "d", ""},
		{"a newer one than the failed (an undo already made) is not gone back to", []appsv1.ControllerRevision{cr("c", 5, revC), cr("d", 4, revD), cr("b", 2, revB)}, "b", "d", ""},
		{"not to one from before revisions: it would start on the failed live config", []appsv1.ControllerRevision{cr("a", 1, "0123456789abcdef"), cr("d", 4, revD)}, "", "", "no revision before 4"},
		{"none before", []appsv1.ControllerRevision{cr("d", 4, revD)}, "", "", "no revision before 4"},
		{"the failed template's revision not written yet", []appsv1.ControllerRevision{cr("c", 3, revC)}, "", "", "no ControllerRevision of the failed template"},
		{"data that is not a template", []appsv1.ControllerRevision{garbled, cr("d", 4, revD)}, "", "", "ControllerRevision g: its data is not a template patch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev, bad, err := PreviousRevision("statefulset/db -n shop", tc.crs, hashKey, revD, func(string, *corev1.PodTemplateSpec) error { return nil })
			if tc.errHas != "" {
				assert.ErrorContains(t, err, tc.errHas)
				assert.ErrorContains(t, err, "statefulset/db -n shop", "the error names the workload")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, prev.Name)
			assert.Equal(t, tc.wantBad, bad.Name)
		})
	}
}

func TestRevisionPatch(t *testing.T) {
	prev := cr("c", 3, revC)
	b, err := RevisionPatch("77", &prev, nil)
	require.NoError(t, err)
	var patch struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Spec struct {
			Template map[string]json.RawMessage `json:"template"`
		} `json:"spec"`
	}
	require.NoError(t, json.Unmarshal(b, &patch))
	assert.Equal(t, "77", patch.Metadata.ResourceVersion, "a workload changed since it was read is not undone")
	assert.JSONEq(t, `"replace"`, string(patch.Spec.Template["$patch"]), "the template replaced whole, as kubectl's undo does")
	var tmpl corev1.PodTemplateSpec
	raw, _ := json.Marshal(patch.Spec.Template)
	require.NoError(t, json.Unmarshal(raw, &tmpl))
	assert.Equal(t, revC, tmpl.Annotations[hashKey])

	bad := cr("x", 1, revC)
	bad.Data.Raw = []byte("null")
	_, err = RevisionPatch("77", &bad, nil)
	assert.ErrorContains(t, err, "ControllerRevision x")
}

func TestStuckPods(t *testing.T) {
	now := time.Unix(1000, 0)
	pod := func(name, revision string, ready bool, readyFor time.Duration, restarts int32, going bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: revision}}}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Time{Time: now.Add(-readyFor)}}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", RestartCount: restarts}}
		if going {
			p.DeletionTimestamp = &metav1.Time{Time: now}
		}
		return p
	}
	pods := []corev1.Pod{
		pod("db-0", "db-good", true, time.Hour, 0, false),
		pod("db-1", "db-good", false, 0, 3, false),         // not ready on the good revision: its controller's to wait for
		pod("db-2", "db-bad", false, 0, 4, false),          // the one it waits for forever
		pod("db-3", "db-bad", true, time.Hour, 0, false),   // available on the failed revision: replaced in order
		pod("db-4", "db-bad", false, 0, 4, true),           // already going
		pod("db-5", "db-bad", true, time.Second, 5, false), // a crash loop up for a moment: deleted at its next fall
		pod("db-6", "db-bad", true, time.Second, 0, false), // just ready: left to become available
		{ObjectMeta: metav1.ObjectMeta{Name: "db-7", Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: "db-bad"}}}, // no status yet
	}
	names := func(ps []corev1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	assert.Equal(t, []string{"db-2", "db-7"}, names(StuckPods(pods, "db-bad")), "only pods of the failed revision that are not Ready: a crash loop up for a moment waits for its next fall")
	assert.Empty(t, StuckPods(pods, "db-other"))
	assert.Equal(t, []string{"db-5"}, names(Flickering(pods, "db-bad")), "the crash loop up for a moment: looked at again until it falls")
}

func TestRunsRevision(t *testing.T) {
	bad := cr("db-d", 3, revD)
	template := &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}, Annotations: map[string]string{hashKey: revD}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
	assert.True(t, RunsRevision(&bad, template), "the failed revision's template, read afresh")
	fixed := template.DeepCopy()
	fixed.Spec.Containers[0].Image = "app:fixed"
	assert.False(t, RunsRevision(&bad, fixed), "an image fixed since")
	garbled := appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: []byte("{")}}
	assert.False(t, RunsRevision(&garbled, template))
}
