package undo

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/plugin/history"
)

func TestRefusal(t *testing.T) {
	app := configref.Ref{Kind: configref.ConfigMap, Namespace: "shop", Name: "app"}
	kept := history.Revision{Number: 2, InputsHash: "rev-aaaaaaaaaaaaaaaa", Config: []history.Source{{Ref: app, Snapshot: "app-1111", Content: "1111"}}}
	gone := history.Revision{Number: 3, InputsHash: "rev-bbbbbbbbbbbbbbbb", Gone: "its snapshot configmap app-2222 is gone", Config: []history.Source{{Ref: app, Content: "2222", Live: "gone"}}}
	live := history.Revision{Number: 1, InputsHash: "wavehash", Config: []history.Source{{Ref: app, Live: "revisions were off"}}}
	noConfig := history.Revision{Number: 1, InputsHash: "wavehash"}
	newest := history.Revision{Number: 4, InputsHash: "rev-cccccccccccccccc"}
	revs := []history.Revision{live, kept, gone, newest}
	for _, tc := range []struct {
		name      string
		to        history.Revision
		current   *corev1.PodTemplateSpec // the workload's template; the newest revision's when nil
		allowLive bool
		want      string
	}{
		{name: "kept", to: kept},
		{name: "the newest", to: newest, want: "deployment/web is at revision 4 already"},
		{name: "the newest, the workload's template changed since (a CronJob's next Job)", to: newest, current: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"v": "2"}}}},
		{name: "snapshots gone", to: gone, want: "revision 3 of deployment/web cannot give its pods their config: its snapshot configmap app-2222 is gone. Its pods would read today's config; pick a revision whose config is kept (kubectl configwave history deployment/web)"},
		{name: "gone, even when live config is allowed", to: gone, allowLive: true, want: "cannot give its pods their config"},
		{name: "revisions off", to: live, want: "revision 1 of deployment/web keeps no config (revisions were off for it): its pods would read today's config. Use kubectl rollout undo for that, or pass --allow-live-config"},
		{name: "revisions off, allowed", to: live, allowLive: true},
		{name: "no config to keep", to: noConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			current := &newest.Template
			if tc.current != nil {
				current = tc.current
			}
			got := Refusal("deployment/web", current, revs, &tc.to, tc.allowLive)
			if tc.want == "" {
				assert.Empty(t, got)
			} else {
				assert.Contains(t, got, tc.want)
			}
		})
	}
}

func TestPatches(t *testing.T) {
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"configwave.io/config-inputs-hash": "rev-aaaaaaaaaaaaaaaa"}}}
	rs := &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Template: *template.DeepCopy()}}
	rs.Spec.Template.Labels[rolloutPodTemplateHash] = "abc"
	job := &batchv1.Job{Spec: batchv1.JobSpec{Template: *template.DeepCopy()}}
	for _, l := range []string{"controller-uid", "job-name", batchv1.ControllerUidLabel, batchv1.JobNameLabel} {
		job.Spec.Template.Labels[l] = "x"
	}
	for _, tc := range []struct {
		name  string
		patch func() ([]byte, error)
		path  string
	}{
		{"a Rollout, without Argo's hash label", func() ([]byte, error) { return RolloutPatch("41", rs) }, "/spec/template"},
		{"a CronJob, without the Job controller's labels", func() ([]byte, error) { return CronJobPatch("41", job) }, "/spec/jobTemplate/spec/template"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.patch()
			require.NoError(t, err)
			var ops []struct {
				Op    string          `json:"op"`
				Path  string          `json:"path"`
				Value json.RawMessage `json:"value"`
			}
			require.NoError(t, json.Unmarshal(b, &ops))
			require.Len(t, ops, 2)
			assert.Equal(t, "test", ops[0].Op, "tested against what was read")
			assert.Equal(t, "/metadata/resourceVersion", ops[0].Path)
			assert.JSONEq(t, `"41"`, string(ops[0].Value))
			assert.Equal(t, "replace", ops[1].Op)
			assert.Equal(t, tc.path, ops[1].Path)
			var got corev1.PodTemplateSpec
			require.NoError(t, json.Unmarshal(ops[1].Value, &got))
			assert.Equal(t, template.Labels, got.Labels)
			assert.Equal(t, template.Annotations, got.Annotations)
		})
	}
	assert.Contains(t, rs.Spec.Template.Labels, rolloutPodTemplateHash, "the ReplicaSet read is left as it is")
}
