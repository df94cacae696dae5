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

// Of reads a workload's annotations; a value Annotation does not take is a problem, worded for
// an InvalidAnnotation Event, and the workload rolls as without it.
func Of(annotations map[string]string) (g Gate, problem string) {
	switch v := annotations[Annotation]; v {
	case Manual:
		g.Manual = true
	case "", "auto":
	default:
		problem = fmt.Sprintf("%s: %q is not \"manual\" or \"auto\"; rollouts are not gated", Annotation, v)
	}
	g.Approved, g.Rejected = annotations[ApproveAnnotation], annotations[RejectAnnotation]
	return g, problem
}

// ID names one change: the inputs record wave would write with it (digests of what the pods
// would see, keyed where wave keys them), hashed once more, so it tells no more than that
// record does. A later change has another ID, so an approval never carries over.
func ID(inputsRecord string) string {
	h := sha256.Sum256([]byte("configwave approval\n" + inputsRecord))
	return "c-" + hex.EncodeToString(h[:])[:16]
}
