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
}

// ControllerRevisionLabel is the label a StatefulSet's and a DaemonSet's pods carry with the
// name of their ControllerRevision.
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
		name := pod.Labels[ControllerRevisionLabel]
		if name == "" || !strings.HasPrefix(name, ref.Name+"-") {
			return Owner{}, false
		}
		return Owner{APIVersion: "apps/v1", Kind: "ControllerRevision", Name: name}, true
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
