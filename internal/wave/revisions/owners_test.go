package revisions

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestOwnerOf(t *testing.T) {
	yes := true
	pod := func(apiVersion, kind, name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "ConfigMap", Name: "not-the-controller", UID: "u0"},
			{APIVersion: apiVersion, Kind: kind, Name: name, UID: "u1", Controller: &yes}}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want Owner
		ok   bool
	}{
		{"a ReplicaSet's pod: the ReplicaSet", pod("apps/v1", "ReplicaSet", "web-7d9f", nil), Owner{"apps/v1", "ReplicaSet", "web-7d9f", "u1", ""}, true},
		{"a CronJob's pod: its Job", pod("batch/v1", "Job", "backup-2901", nil), Owner{"batch/v1", "Job", "backup-2901", "u1", ""}, true},
		{"a StatefulSet's pod: the ControllerRevision it names, uid to read, its set's uid kept", pod("apps/v1", "StatefulSet", "db", map[string]string{ControllerRevisionLabel: "db-5c8b"}),
			Owner{"apps/v1", "ControllerRevision", "db-5c8b", "", "u1"}, true},
		{"a DaemonSet's pod: its label is the hash alone", pod("apps/v1", "DaemonSet", "agent", map[string]string{ControllerRevisionLabel: "66f5c"}), Owner{"apps/v1", "ControllerRevision", "agent-66f5c", "", "u1"}, true},
		{"a revision label of another owner's name", pod("apps/v1", "StatefulSet", "db", map[string]string{ControllerRevisionLabel: "other-5c8b"}), Owner{}, false},
		{"a StatefulSet's pod without the label", pod("apps/v1", "StatefulSet", "db", nil), Owner{}, false},
		{"another group's kind of that name", pod("example.com/v1", "ReplicaSet", "x", nil), Owner{}, false},
		{"a bare pod", &corev1.Pod{}, Owner{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := OwnerOf(tc.pod)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestOwnerPatch(t *testing.T) {
	owner := Owner{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "u1"}
	patch, err := OwnerPatch([]metav1.OwnerReference{{UID: "u0"}}, owner)
	require.NoError(t, err)
	var got struct {
		Metadata struct{ OwnerReferences []metav1.OwnerReference }
	}
	require.NoError(t, json.Unmarshal(patch, &got))
	require.Len(t, got.Metadata.OwnerReferences, 1, "merged by uid: the others stay")
	ref := got.Metadata.OwnerReferences[0]
	assert.Equal(t, "web-1", ref.Name)
	assert.False(t, *ref.Controller)
	assert.False(t, *ref.BlockOwnerDeletion, "a revision's removal is never held up by its config")

	patch, err = OwnerPatch([]metav1.OwnerReference{{UID: "u1"}}, owner)
	require.NoError(t, err)
	assert.Nil(t, patch, "there already")
	_, err = OwnerPatch(nil, Owner{Kind: "ControllerRevision", Name: "db-1"})
	assert.Error(t, err, "an owner without its uid")
}

func TestCheckOwner(t *testing.T) {
	const ann = "configwave.io/config-inputs-hash"
	rev := InputsHash("v1")
	rs := Owner{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "u1"}
	cr := Owner{APIVersion: "apps/v1", Kind: "ControllerRevision", Name: "db-1"}
	crData := []byte(`{"spec":{"template":{"metadata":{"annotations":{"` + ann + `":"` + rev + `"}}}}}`)
	for _, tc := range []struct {
		name     string
		claimed  Owner
		uid      string
		template map[string]string
		data     []byte
		errHas   string
	}{
		{"a ReplicaSet of the revision", rs, "u1", map[string]string{ann: rev}, nil, ""},
		{"another object under its name", rs, "u2", map[string]string{ann: rev}, nil, "not the u1 the pod names"},
		{"a ReplicaSet of another revision", rs, "u1", map[string]string{ann: InputsHash("v2")}, nil, "not " + rev},
		{"a ReplicaSet of no revision", rs, "u1", nil, nil, `revision ""`},
		{"a ControllerRevision of the revision", cr, "u9", nil, crData, ""},
		{"a ControllerRevision of another", cr, "u9", nil, []byte(`{"spec":{}}`), "not a revision of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckOwner(tc.claimed, types.UID(tc.uid), tc.template, tc.data, rev, ann)
			if tc.errHas == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tc.errHas)
			}
		})
	}
}
