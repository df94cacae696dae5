package revisionhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/revisions"
)

var revision = revisions.InputsHash("configmap/app=1")

func review(t testing.TB, op admissionv1.Operation, sub string, pod *corev1.Pod) []byte {
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "u1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespace: "shop",
			Operation: op, SubResource: sub, Object: runtime.RawExtension{Raw: raw}},
	})
	require.NoError(t, err)
	return b
}

// dryRun marks a review as a dry run (kubectl apply --dry-run=server).
func dryRun(t testing.TB, body []byte) []byte {
	var r admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(body, &r))
	yes := true
	r.Request.DryRun = &yes
	b, err := json.Marshal(r)
	require.NoError(t, err)
	return b
}

func appPod(hash string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Annotations: map[string]string{InputsHashAnnotation: hash}},
		Spec: corev1.PodSpec{
			Volumes:             []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}},
			Containers:          []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}}}},
		},
	}
}

type look struct {
	index map[string]string
	gone  map[string]bool
	reads int
}

func (l *look) Index(_ context.Context, ns, name string) (map[string]string, bool, error) {
	l.reads++
	if l.index == nil || ns != "shop" || name != revisions.IndexName(revision) {
		return nil, false, nil
	}
	return l.index, true, nil
}
func (l *look) Exists(_ context.Context, ref configref.Ref) bool { return !l.gone[ref.Name] }

func answer(t *testing.T, h http.Handler, body []byte) (*admissionv1.AdmissionResponse, []map[string]string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(body)))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var out admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	require.NotNil(t, out.Response)
	assert.Equal(t, "admission.k8s.io/v1", out.APIVersion)
	assert.EqualValues(t, "u1", out.Response.UID)
	assert.True(t, out.Response.Allowed, "every pod is admitted")
	var ops []map[string]string
	if out.Response.Patch != nil {
		require.NoError(t, json.Unmarshal(out.Response.Patch, &ops))
	}
	return out.Response, ops
}

func TestHandler(t *testing.T) {
	snap := revisions.SnapshotName("app", "0123456789")
	index := map[string]string{"configmap.app": snap}
	t.Run("a pod of a revision reads its snapshots everywhere", func(t *testing.T) {
		_, ops := answer(t, &Handler{Look: &look{index: index}}, review(t, admissionv1.Create, "", appPod(revision)))
		assert.Len(t, ops, 3)
		for _, op := range ops {
			assert.Equal(t, snap, op["value"])
		}
	})
	t.Run("an ephemeral container added: only its part", func(t *testing.T) {
		_, ops := answer(t, &Handler{Look: &look{index: index}}, review(t, admissionv1.Update, "ephemeralcontainers", appPod(revision)))
		require.Len(t, ops, 1)
		assert.Equal(t, "/spec/ephemeralContainers/0/envFrom/0/configMapRef/name", ops[0]["path"])
	})
	t.Run("a pod of no revision: admitted as it is, nothing read", func(t *testing.T) {
		l := &look{index: index}
		_, ops := answer(t, &Handler{Look: l}, review(t, admissionv1.Create, "", appPod("0123456789abcdef")))
		assert.Empty(t, ops)
		assert.Zero(t, l.reads)
	})
	t.Run("an update of a pod otherwise: admitted as it is", func(t *testing.T) {
		_, ops := answer(t, &Handler{Look: &look{index: index}}, review(t, admissionv1.Update, "", appPod(revision)))
		assert.Empty(t, ops)
	})
	t.Run("no index: live, a warning, and Tell once per revision and reason", func(t *testing.T) {
		var told []string
		h := &Handler{Look: &look{}, Tell: func(_ *corev1.Pod, why string) { told = append(told, why) }}
		resp, ops := answer(t, h, review(t, admissionv1.Create, "", appPod(revision)))
		assert.Empty(t, ops)
		require.Len(t, resp.Warnings, 1)
		assert.Contains(t, resp.Warnings[0], "the pod reads the live objects")
		answer(t, h, review(t, admissionv1.Create, "", appPod(revision)))
		assert.Len(t, told, 1)
	})
	t.Run("a dry run: the same answer, and no Event (sideEffects NoneOnDryRun)", func(t *testing.T) {
		var told []string
		h := &Handler{Look: &look{}, Tell: func(_ *corev1.Pod, why string) { told = append(told, why) }}
		resp, ops := answer(t, h, dryRun(t, review(t, admissionv1.Create, "", appPod(revision))))
		assert.Empty(t, ops)
		require.Len(t, resp.Warnings, 1, "the dry run still tells its caller")
		assert.Empty(t, told, "no Event from a dry run")
		answer(t, h, review(t, admissionv1.Create, "", appPod(revision)))
		assert.Len(t, told, 1, "the real create after it is told")
	})
	t.Run("not a review: 400, which failurePolicy Ignore admits", func(t *testing.T) {
		rec := httptest.NewRecorder()
		(&Handler{Look: &look{}}).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader([]byte(`{"kind":"Pod"}`))))
		assert.Equal(t, http.StatusBadRequest, rec.Code)
		rec = httptest.NewRecorder()
		(&Handler{Look: &look{}}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/mutate", nil))
		assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	})
}

// FuzzParse: whatever reaches the webhook's port, Parse and Respond never panic, and a body
// they accept is answered for its own request.
func FuzzParse(f *testing.F) {
	f.Add(review(f, admissionv1.Create, "", appPod(revision)))
	f.Add(review(f, admissionv1.Update, "ephemeralcontainers", appPod(revision)))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","kind":{"kind":"Pod"},"operation":"CREATE","object":null}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rev, req, err := Parse(body)
		if err != nil {
			return
		}
		var d revisions.Decision
		if req.Pod != nil {
			d = revisions.Decide(revisions.Admission{Pod: req.Pod, InputsHash: req.Pod.Annotations[InputsHashAnnotation], IndexFound: true,
				Index: revisions.Snapshots{{Kind: configref.ConfigMap, Namespace: req.Pod.Namespace, Name: "app"}: "app-0123456789"}})
		}
		out, err := Respond(rev, req, d)
		require.NoError(t, err)
		var back admissionv1.AdmissionReview
		require.NoError(t, json.Unmarshal(out, &back))
		assert.Equal(t, rev.Request.UID, back.Response.UID)
	})
}
