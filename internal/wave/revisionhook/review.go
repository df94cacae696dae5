// Package revisionhook serves the mutating admission webhook of config revisions: for each Pod
// CREATE (and each ephemeral container added), it reads the pod's revision from its
// configwave.io/config-inputs-hash, finds the revision's index, and answers with the patch
// revisions.Decide makes, so that the pod reads its revision's snapshots. It always admits
// the pod: a config tool never blocks a scale-up. The webhook's configuration registers it
// with failurePolicy Ignore, so a wave that is down or slow admits pods unchanged too; they
// read the live objects, as they would without the feature.
//
//	h := &revisionhook.Handler{Look: revisionhook.APILook{Core: client.CoreV1()}, Tell: tell}
//	srv := serve.New(ln, h) // TLS from --revisions-webhook-cert-dir (revisionhook.KeyPair)
package revisionhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/wave/revisions"
)

// maxReview bounds the body read. A pod is rarely over 100 KiB, and the reviews this webhook is
// registered for are of CREATE (one pod; an update through the ephemeralcontainers
// subresource carries it twice). A larger one is refused unread: the API server, under
// failurePolicy Ignore, admits that pod unchanged, reading its sources live.
const maxReview = 1 << 20

// ephemeralSubresource is the subresource `kubectl debug` adds ephemeral containers through: an
// update of the pod in which only spec.ephemeralContainers may change.
const ephemeralSubresource = "ephemeralcontainers"

// Request is what the handler decides on: the pod, and whether it comes through the
// ephemeral containers' subresource.
type Request struct {
	Pod       *corev1.Pod
	Ephemeral bool
	DryRun    bool // a dry run: answered alike, with no side effect (the owner references)
}

// errNotAReview is a body that is not an AdmissionReview of a pod.
var errNotAReview = errors.New("not an admission.k8s.io/v1 AdmissionReview of a pod")

// Parse reads an AdmissionReview. A request for anything but a pod's creation or its ephemeral
// containers gives a nil Pod: it is admitted unchanged.
func Parse(body []byte) (*admissionv1.AdmissionReview, Request, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, Request{}, fmt.Errorf("%w: %w", errNotAReview, err)
	}
	req := review.Request
	if req == nil || req.UID == "" {
		return nil, Request{}, fmt.Errorf("%w: no request, or no uid", errNotAReview)
	}
	if review.APIVersion != admissionv1.SchemeGroupVersion.String() || review.Kind != "AdmissionReview" {
		return nil, Request{}, fmt.Errorf("%w: apiVersion %q, kind %q", errNotAReview, review.APIVersion, review.Kind)
	}
	if req.Kind.Group != "" || req.Kind.Kind != "Pod" {
		return &review, Request{}, nil
	}
	ephemeral := req.Operation == admissionv1.Update && req.SubResource == ephemeralSubresource
	if !(req.Operation == admissionv1.Create && req.SubResource == "") && !ephemeral {
		return &review, Request{}, nil
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return nil, Request{}, fmt.Errorf("%w: the object is not a pod: %w", errNotAReview, err)
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace // a pod created with generateName in a namespace's path
	}
	return &review, Request{Pod: &pod, Ephemeral: ephemeral, DryRun: req.DryRun != nil && *req.DryRun}, nil
}

// Respond is the answer to review: allowed, with d's patch. Through the ephemeral containers'
// subresource only their part of the patch is kept: the API server refuses an update there
// that changes anything else, and the rest of the pod was rewritten when it was created.
func Respond(review *admissionv1.AdmissionReview, r Request, d revisions.Decision) ([]byte, error) {
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	ops := d.Ops
	if r.Ephemeral {
		ops = nil
		for _, op := range d.Ops {
			if strings.HasPrefix(op.Path, "/spec/ephemeralContainers/") {
				ops = append(ops, op)
			}
		}
	}
	if len(ops) > 0 {
		patch, err := json.Marshal(ops)
		if err != nil {
			return nil, err
		}
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
	}
	if d.Why != "" {
		resp.Warnings = []string{"configwave: " + d.Why}
	}
	return json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: resp,
	})
}
