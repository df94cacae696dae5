package autorollback

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Made is one revision of a workload as its controller keeps it: a ReplicaSet's template, or
// a ControllerRevision's, and when the object was made. A ReplicaSet also has its revision
// number (Number, 0 where it has none) and says whether an undo brought it back (CameBack: its
// revision-history annotation), which tell the order where creation times, kept to the
// second, cannot.
type Made struct {
	Template corev1.PodTemplateSpec
	Created  time.Time
	Number   int64
	CameBack bool
}

// AtEarlierRevision says whether template, a workload's that names no config revision of
// wave's, is one of its earlier revisions (among revs), which is what an undo puts back: a
// revision with this template made before the newest revision of wave's (the template with
// the inputs hash newest), or brought back by an undo. A template put in by hand without wave's
// annotation (kubectl replace of the user's file) is a revision made after that one, or none
// yet: no undo. By revision numbers where both have one (ReplicaSets); else by creation,
// where one made in the same second as the newest is taken as earlier.
//
// Without any revision of newest to compare with (deleted, or not listed) it says yes, as an
// undo: a hold rolls nothing, while taking an undo for new would roll it forward.
func AtEarlierRevision(template *corev1.PodTemplateSpec, revs []Made, inputsHashAnnotation, newest string) bool {
	var newestAt time.Time
	var newestNumber int64
	found := false
	for _, r := range revs {
		if r.Template.Annotations[inputsHashAnnotation] != newest {
			continue
		}
		if !found || r.Created.After(newestAt) {
			newestAt = r.Created
		}
		newestNumber, found = max(newestNumber, r.Number), true
	}
	if !found {
		return true
	}
	for i := range revs {
		r := &revs[i]
		if !equalIgnoringHash(&r.Template, template) {
			continue
		}
		if r.Number > 0 && newestNumber > 0 {
			if r.CameBack || r.Number < newestNumber {
				return true
			}
			continue
		}
		if !r.Created.After(newestAt) {
			return true
		}
	}
	return false
}
