package revisions

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A snapshot and an index live exactly as long as a revision that uses them: each carries an
// owner reference to every revision object whose pods read it (a Deployment's or a Rollout's
// ReplicaSet, a StatefulSet's or a DaemonSet's ControllerRevision, a CronJob's Job), so that
// Kubernetes' garbage collector removes it once `revisionHistoryLimit` (or a CronJob's history
// limits) removed the last of them. wave adds the reference when the first pod of the revision
// is created, which is when the revision object is known; it never deletes anything itself.

// Owner is a revision object.
type Owner struct {
	APIVersion, Kind, Name string
	UID                    types.UID
	// Parent is, for a ControllerRevision, the uid of the StatefulSet or DaemonSet that the
	// pod names as its controller: the pod does not carry the revision's own uid, and a set
	// deleted and made again under its name has revisions of the same names.
	Parent types.UID
}

// ControllerRevisionLabel is the label a StatefulSet's pods carry with the name of their
// ControllerRevision, and a DaemonSet's with its hash.
const ControllerRevisionLabel = "controller-revision-hash"

// OwnerOf is the revision object of a pod being created: its controller when that is a
// ReplicaSet or a Job; for a StatefulSet's or DaemonSet's pod, the ControllerRevision it names,
// whose uid must be read (revision, with Owner's UID empty). ok is false for a pod of no such
// revision (a bare pod, a ReplicaSet of its own is still one).
func OwnerOf(pod *corev1.Pod) (owner Owner, ok bool) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return Owner{}, false
	}
	switch {
	case ref.Kind == "ReplicaSet" && ref.APIVersion == "apps/v1", ref.Kind == "Job" && ref.APIVersion == "batch/v1":
		return Owner{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID}, true
	case (ref.Kind == "StatefulSet" || ref.Kind == "DaemonSet") && ref.APIVersion == "apps/v1":
		// A StatefulSet's pods carry the ControllerRevision's name, a DaemonSet's its hash
		// alone (the revision is named NAME-HASH).
		label := pod.Labels[ControllerRevisionLabel]
		switch {
		case label == "":
			return Owner{}, false
		case ref.Kind == "DaemonSet":
			label = ref.Name + "-" + label
		case !strings.HasPrefix(label, ref.Name+"-"):
			return Owner{}, false
		}
		return Owner{APIVersion: "apps/v1", Kind: "ControllerRevision", Name: label, Parent: ref.UID}, true
	}
	return Owner{}, false
}

// OwnerPatch is the strategic merge patch that adds owner to an object that has the owner
// references have (merged by uid, so a concurrent add is kept), or nil when it is there. The
// reference neither controls nor blocks the owner's deletion: a revision's removal is never held
// up by its config.
func OwnerPatch(have []metav1.OwnerReference, owner Owner) ([]byte, error) {
	if owner.UID == "" || owner.Name == "" {
		return nil, fmt.Errorf("owner %s %q: no uid", owner.Kind, owner.Name)
	}
	for _, r := range have {
		if r.UID == owner.UID {
			return nil, nil
		}
	}
	no := false
	ref := metav1.OwnerReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID, Controller: &no, BlockOwnerDeletion: &no}
	return json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{ref}}})
}

// CheckOwner tells whether an object read from the API is the revision a pod claims as its
// owner, and one whose pods read revision: the webhook's port answers whoever reaches it, so a
// forged AdmissionReview must not make wave add a reference to a revision that does not use
// the snapshot, or to no object at all (the garbage collector deletes an object whose every
// owner is gone). uid is the found object's, and records the template it creates pods from:
// a ReplicaSet's or Job's pod template annotations, a ControllerRevision's data.
func CheckOwner(claimed Owner, uid types.UID, template map[string]string, data []byte, revision, inputsHashAnnotation string) error {
	if claimed.UID != "" && claimed.UID != uid {
		return fmt.Errorf("%s %s: uid %s, not the %s the pod names (a forged request, or a revision made again under its name)", claimed.Kind, claimed.Name, uid, claimed.UID)
	}
	switch claimed.Kind {
	case "ControllerRevision":
		if !strings.Contains(string(data), `"`+inputsHashAnnotation+`":"`+revision+`"`) {
			return fmt.Errorf("%s %s: not a revision of %s", claimed.Kind, claimed.Name, revision)
		}
	default:
		if template[inputsHashAnnotation] != revision {
			return fmt.Errorf("%s %s: its pods are of revision %q, not %s", claimed.Kind, claimed.Name, template[inputsHashAnnotation], revision)
		}
	}
	return nil
}
