package autorollback

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Made is one revision of a workload as its controller keeps it: a ReplicaSet's template, or
// a ControllerRevision's, and when the object was made.
type Made struct {
	Template corev1.PodTemplateSpec
	Created  time.Time
}

// AtEarlierRevision says whether template, a workload's that names no config revision of
// wave's, is one of its earlier revisions (among revs), which is what an undo puts back: a
// revision with this template made no later than the newest revision of wave's (the template
// with the inputs hash newest). A template put in by hand without wave's annotation (kubectl
// replace of the user's file) is a revision made after that one, or none yet: no undo.
//
// Without any revision of newest to compare with (deleted, or not listed) it says yes, as an
// undo: a hold rolls nothing, while taking an undo for new would roll it forward.
func AtEarlierRevision(template *corev1.PodTemplateSpec, revs []Made, inputsHashAnnotation, newest string) bool {
	var newestAt time.Time
	found := false
	for _, r := range revs {
		if r.Template.Annotations[inputsHashAnnotation] == newest && (!found || r.Created.After(newestAt)) {
			newestAt, found = r.Created, true
		}
	}
	if !found {
		return true
	}
	for i := range revs {
		if !revs[i].Created.After(newestAt) && equalIgnoringHash(&revs[i].Template, template) {
			return true
		}
	}
	return false
}
