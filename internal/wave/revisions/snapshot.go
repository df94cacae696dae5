// Package revisions makes config part of a workload's revision history (configwave.io/revisions):
// every content of a ConfigMap or Secret that a revision uses is kept as an immutable copy, a
// snapshot, and the pods of that revision read their snapshots wherever their spec names the
// source, so that `kubectl rollout undo` and a canary's abort bring the old config back with
// the old template. This package holds the decisions, as pure functions: what a snapshot is
// called and holds, which index says what a revision uses, and how a pod's spec is rewritten.
//
//	id := revisions.ContentID(keyDigests, "")            // from the digests wave already keeps
//	snap, err := revisions.SnapshotOf(configMap, id)     // create once; never written after
//	ops := revisions.Rewrite(&pod.Spec, index.Snapshots) // the webhook's patch
package revisions

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/configwave/configwave/internal/wave/podrefs"
)

// Annotations and labels of the feature. OptInAnnotation goes on a workload (opt in) or on a
// Secret or ConfigMap ("false": read live, for objects another system rotates in place).
const (
	OptInAnnotation = podrefs.RevisionsAnnotation
	// RevisionLabel on a workload is the inputs hash of the newest revision wave rolled it to.
	// A label, because `kubectl rollout undo` puts back a Deployment's annotations with its
	// template but not its labels: so wave tells an undo from a change.
	RevisionLabel = "configwave.io/revision"
	// FollowedLabel on a workload, beside RevisionLabel, is a hash of the part of the newest
	// revision's config that a hold after an undo is about: the objects the workload follows
	// and keeps in its revisions. A change of any other object (one opted out, which another
	// system rotates in place; one the workload does not follow) leaves a hold as it is.
	FollowedLabel = "configwave.io/revision-followed"
	// SnapshotOfLabel on a snapshot selects every snapshot of one source; its value is the
	// source's name where that is a valid label value, else a shortened name (SourceLabelValue).
	SnapshotOfLabel = "configwave.io/snapshot-of"
	// SnapshotOfAnnotation holds the source's whole name, which a label value may not.
	SnapshotOfAnnotation = "configwave.io/snapshot-of"
	// ContentAnnotation is the content ID the snapshot's name ends with.
	ContentAnnotation = "configwave.io/content"
	// ManagedByLabel marks every object this feature creates, for GitOps tools to leave alone
	// (docs/gitops.md) and for `kubectl get -l` to find.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "configwave"
)

// contentIDLen is how many hex digits of the content hash a name carries: 40 bits tell apart the
// few contents one source has while its revisions live, and leave room for the source's name.
const contentIDLen = 10

// ContentID names one content of a source from the digests of its keys, as wave's Digester
// makes them (keyed under the install key, or for Secrets without a key from uid and
// resourceVersion): so a snapshot's name reveals nothing of a value that the workload's inputs
// record does not already hold. secretType is a Secret's type ("" for a ConfigMap); two Secrets
// that differ only there are different contents.
func ContentID(keyDigests map[string]string, secretType string) string {
	h := sha256.New()
	fmt.Fprintf(h, "configwave.io/content\x00%s\x00", secretType)
	for _, k := range slices.Sorted(maps.Keys(keyDigests)) {
		fmt.Fprintf(h, "%s\x00%s\x00", k, keyDigests[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:contentIDLen]
}

// SnapshotName is the name of the snapshot of source's content id: "SOURCE-ID", within the 253
// characters of a ConfigMap's or Secret's name. A source name too long for that is cut, and
// the cut never ends in '-' or '.'; the ID keeps the names apart.
func SnapshotName(source, id string) string {
	room := validation.DNS1123SubdomainMaxLength - len(id) - 1
	if len(source) > room {
		source = strings.TrimRight(source[:room], "-.")
	}
	return source + "-" + id
}

// SourceLabelValue is the value of SnapshotOfLabel for a source: the name itself where it is a
// valid label value, else its first characters and a hash of the whole name.
func SourceLabelValue(source string) string {
	if len(validation.IsValidLabelValue(source)) == 0 {
		return source
	}
	sum := sha256.Sum256([]byte(source))
	tag := hex.EncodeToString(sum[:])[:contentIDLen]
	head := source[:min(len(source), validation.LabelValueMaxLength-len(tag)-1)]
	head = strings.TrimRight(head, "-._")
	return head + "-" + tag
}

// ProtectiveLabels are the source's labels a snapshot carries, with the one value that
// protects: those that keep a copy out of somewhere it must not go (a backup), which a copy
// without them would leak to. No other label of the source: one that selects it for something
// (k8s-sidecar's grafana_dashboard, Argo CD's secret-type) must not select its snapshots too.
var ProtectiveLabels = map[string]string{"velero.io/exclude-from-backup": "true"}

// SnapshotOf is the snapshot of a ConfigMap or Secret as it is now: an immutable copy in the
// same namespace with every key byte for byte (data and binaryData, a Secret's type), labelled
// with its source. Of the source's own labels and annotations it carries only the
// ProtectiveLabels, so that nothing that selects the source by label selects its snapshots
// too, and no owner: wave adds the revisions that use it as owners, and Kubernetes' garbage
// collector removes it with the last.
func SnapshotOf(source metav1.Object, id string) (metav1.Object, error) {
	meta := metav1.ObjectMeta{
		Name:        SnapshotName(source.GetName(), id),
		Namespace:   source.GetNamespace(),
		Labels:      map[string]string{SnapshotOfLabel: SourceLabelValue(source.GetName()), ManagedByLabel: ManagedBy},
		Annotations: map[string]string{SnapshotOfAnnotation: source.GetName(), ContentAnnotation: id},
	}
	for k, protects := range ProtectiveLabels {
		if source.GetLabels()[k] == protects {
			meta.Labels[k] = protects
		}
	}
	immutable := true
	switch src := source.(type) {
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: meta, Immutable: &immutable,
			Data: maps.Clone(src.Data), BinaryData: cloneBytes(src.BinaryData),
		}, nil
	case *corev1.Secret:
		return &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: meta, Immutable: &immutable,
			Type: src.Type, Data: cloneBytes(src.Data),
			// StringData is write-only: the API server has merged it into Data already.
		}, nil
	}
	return nil, fmt.Errorf("snapshot of %s/%s: a %T is neither a ConfigMap nor a Secret", source.GetNamespace(), source.GetName(), source)
}

func cloneBytes(m map[string][]byte) map[string][]byte {
	if m == nil {
		return nil
	}
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}
