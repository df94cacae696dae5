package autorollback

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/wave/revisions"
)

const hashKey = "configwave.io/config-inputs-hash"

var revA, revB, revC, revD = revisions.InputsHash("a"), revisions.InputsHash("b"), revisions.InputsHash("c"), revisions.InputsHash("d")

func rs(name, revision, hash string) appsv1.ReplicaSet {
	return appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{revisionAnnotation: revision, "configwave.io/config-inputs": "record of " + name}},
		Spec: appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
			Labels: map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: name}, Annotations: map[string]string{hashKey: hash}}}},
	}
}

func TestPrevious(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Annotations: map[string]string{revisionAnnotation: "4"}}}
	for _, tc := range []struct {
		name   string
		rss    []appsv1.ReplicaSet
		want   string
		errHas string
	}{
		{"the revision before", []appsv1.ReplicaSet{rs("a", "1", revA), rs("b", "2", revB), rs("c", "3", revC), rs("d", "4", revD)}, "c", ""},
		{"past one of the same failed config (undone and redone)", []appsv1.ReplicaSet{rs("b", "2", revB), rs("c", "3", revD), rs("d", "4", revD)}, "b", ""},
		{"not to one from before revisions: it would start on the failed live config", []appsv1.ReplicaSet{rs("a", "1", "0123456789abcdef"), rs("d", "4", revD)}, "", "no revision before 4"},
		{"none before", []appsv1.ReplicaSet{rs("d", "4", revD)}, "", "no revision before 4"},
		{"a ReplicaSet without a number is not one", []appsv1.ReplicaSet{rs("x", "", revC), rs("d", "4", revD)}, "", "no revision before 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Previous(d, tc.rss, hashKey, revD)
			if tc.errHas != "" {
				assert.ErrorContains(t, err, tc.errHas)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.Name)
		})
	}
	_, err := Previous(&appsv1.Deployment{}, nil, hashKey, revD)
	assert.ErrorContains(t, err, "no revision number")
}

func TestUndoPatch(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "77", Annotations: map[string]string{
		revisionAnnotation: "4", corev1.LastAppliedConfigAnnotation: "{...}", "configwave.io/config-inputs": "the failed record"}}}
	prev := rs("c", "3", revC)
	b, err := UndoPatch(d, &prev)
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
	assert.Equal(t, map[string]string{revisionAnnotation: "4", corev1.LastAppliedConfigAnnotation: "{...}", "configwave.io/config-inputs": "record of c"}, ann,
		"the ReplicaSet's annotations, and the Deployment's own bookkeeping, as kubectl's undo")
}
