package revisions

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/configwave/configwave/internal/kube/configref"
)

// Admission is what the webhook gathers about one pod before it decides: the pod, which
// revision it belongs to, and that revision's index.
type Admission struct {
	Pod *corev1.Pod
	// InputsHash is the pod's configwave.io/config-inputs-hash: which revision it belongs to;
	// one that InputsHash made says its workload runs with revisions.
	InputsHash string
	// Index is the revision's index, parsed; IndexFound false when there is none, IndexErr
	// when it could not be read or parsed.
	Index      Snapshots
	IndexFound bool
	IndexErr   error
	// SnapshotExists tells whether a snapshot is there (a snapshot deleted by hand is not).
	SnapshotExists func(kind configref.Kind, name string) bool
	// MountableSecretsOnly: the pod's ServiceAccount enforces mountable secrets
	// (kubernetes.io/enforce-mountable-secrets: "true"), so the API server refuses a pod that
	// names a Secret the ServiceAccount does not list, as a snapshot is not: the pod reads its
	// Secrets live, and its ConfigMaps from their snapshots.
	MountableSecretsOnly bool
}

// EnforceMountableSecretsAnnotation on a ServiceAccount makes the API server refuse pods that
// name Secrets it does not list (deprecated since Kubernetes 1.32, still enforced).
const EnforceMountableSecretsAnnotation = "kubernetes.io/enforce-mountable-secrets"

// Decision is the webhook's answer: the patch, and, when the pod reads some or all of its
// sources live although its workload runs with revisions, why, for one Event on the pod's
// workload. The pod is always admitted: a config tool never blocks a scale-up.
type Decision struct {
	Ops []Op
	// Use are the snapshots the pod reads, which live as long as its revision (OwnerPatch).
	Use Snapshots
	// Live names the sources the pod reads live against its revision; Why says why.
	Live []configref.Ref
	Why  string
}

// Decide is the webhook's decision for one pod, a pure function of what was gathered.
func Decide(a Admission) Decision {
	if a.Pod == nil || !IsRevision(a.InputsHash) {
		return Decision{} // not a pod of a revision: nothing to rewrite, nothing to say
	}
	ns := a.Pod.Namespace
	if a.IndexErr != nil || !a.IndexFound {
		live := SourcesOf(ns, &a.Pod.Spec)
		if len(live) == 0 {
			return Decision{}
		}
		why := fmt.Sprintf("revision %s has no snapshot index (%s): the pod reads the live objects; it is made again on the next change of its config", a.InputsHash, IndexName(a.InputsHash))
		if a.IndexErr != nil {
			why = fmt.Sprintf("the snapshot index of revision %s cannot be used: %v; the pod reads the live objects", a.InputsHash, a.IndexErr)
		}
		return Decision{Live: live, Why: why}
	}
	use := make(Snapshots, len(a.Index))
	var gone []string
	var live []configref.Ref
	var unmountable []string
	for _, ref := range slices.SortedFunc(maps.Keys(a.Index), configref.Compare) {
		snap := a.Index[ref]
		if a.MountableSecretsOnly && ref.Kind == configref.Secret {
			unmountable = append(unmountable, ref.Kind.Lower()+"/"+ref.Name)
			live = append(live, ref)
			continue
		}
		if a.SnapshotExists != nil && !a.SnapshotExists(ref.Kind, snap) {
			gone = append(gone, ref.Kind.Lower()+"/"+snap)
			live = append(live, ref)
			continue
		}
		use[ref] = snap
	}
	d := Decision{Ops: Rewrite(ns, &a.Pod.Spec, use), Use: use}
	var why []string
	if len(unmountable) > 0 {
		why = append(why, fmt.Sprintf("the pod's ServiceAccount %s enforces mountable secrets (%s), which a snapshot is not among: the pod reads %s live, so an undo does not bring their old values back; list the snapshots in the ServiceAccount's secrets, or drop the annotation (deprecated since Kubernetes 1.32)",
			cmp.Or(a.Pod.Spec.ServiceAccountName, "default"), EnforceMountableSecretsAnnotation, strings.Join(unmountable, ", ")))
	}
	if len(gone) > 0 {
		why = append(why, fmt.Sprintf("the snapshots %s of revision %s are gone (deleted by hand?) or could not be read in time: the pod reads those sources live; the next change of its config makes new ones", strings.Join(gone, ", "), a.InputsHash))
	}
	if len(why) > 0 {
		d.Live, d.Why = live, strings.Join(why, "; ")
	}
	return d
}

// SourcesOf are the ConfigMaps and Secrets a pod spec names in the places Rewrite changes.
func SourcesOf(namespace string, spec *corev1.PodSpec) []configref.Ref {
	all := Snapshots{}
	rewrite(spec, func(kind configref.Kind, name string) (string, bool) {
		all[configref.Ref{Kind: kind, Namespace: namespace, Name: name}] = ""
		return "", false
	})
	return slices.SortedFunc(maps.Keys(all), configref.Compare)
}
