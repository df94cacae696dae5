// Package approval is the gate before a config rollout that a workload asks for with
// configwave.io/approval: "manual" (Stakater Reloader #414, "approval based reload"): wave
// stops before rolling a change, says so, and rolls it once a person approves that very
// change, by an annotation on the workload (so GitOps and RBAC decide who may approve: whoever
// may patch the workload, who could roll it anyway). `kubectl configwave approve` and
// `reject` write the annotations.
package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

const (
	// Annotation on a workload: "manual" gates its config rollouts; "" or "auto" does not.
	Annotation = "configwave.io/approval"
	// ApproveAnnotation carries the ID of the pending change a person approved; wave removes
	// it with the rollout.
	ApproveAnnotation = "configwave.io/approve"
	// RejectAnnotation carries the ID of the pending change a person rejected: it is not
	// rolled and not asked for again; the next change is.
	RejectAnnotation = "configwave.io/reject"
	// Manual is Annotation's value that gates.
	Manual = "manual"
)

// Gate is what a workload says of approval.
type Gate struct {
	Manual   bool
	Approved string // ApproveAnnotation's value
	Rejected string // RejectAnnotation's value
}

// Of reads a workload's annotations. A value Annotation does not take is a problem, worded for
// an InvalidAnnotation Event, and gates as "manual" does: whoever wrote it meant some gate, and
// a typo must not roll a change nobody approved.
func Of(annotations map[string]string) (g Gate, problem string) {
	switch v := strings.ToLower(strings.TrimSpace(annotations[Annotation])); v {
	case Manual:
		g.Manual = true
	case "", "auto":
	default:
		g.Manual = true
		problem = fmt.Sprintf("%s: %q is not \"manual\" or \"auto\"; taken as \"manual\": each config change waits for approval", Annotation, annotations[Annotation])
	}
	g.Approved, g.Rejected = annotations[ApproveAnnotation], annotations[RejectAnnotation]
	return g, problem
}

// ID names one change: from the inputs record the pods run (from) to what the workload follows
// now (to: its followed objects' digests, keyed where wave keys them), hashed once more, so it
// tells no more than the records on the workload do. A later change, or the same content
// reached from another, has another ID, so an approval never carries over; a change of an
// object the workload does not follow leaves it as it is.
func ID(from, to string) string {
	h := sha256.Sum256([]byte("configwave approval\n" + from + "\n" + to))
	return "c-" + hex.EncodeToString(h[:])[:16]
}
