package revisions

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/configwave/configwave/internal/kube/configref"
)

// A revision's index is an immutable ConfigMap in the workload's namespace, named from the
// inputs hash that wave writes on the pod template (configwave.io/config-inputs-hash), which
// every pod of that revision carries: so the webhook finds a new pod's snapshots from the pod
// alone, and the workload as stored, and as in Git, keeps naming its sources. Its data maps
// "configmap.NAME" or "secret.NAME" to the snapshot's name; it holds names only, never a value.
// Workloads with the same inputs share one index, as they share the snapshots.

// revisionPrefix starts the inputs hash of a workload that runs with revisions, so that the
// hash on a pod says whether its revision has an index, and turning revisions on changes the
// template once (which rolls the workload, so that every revision from then on names its
// config).
const revisionPrefix = "rev-"

// hashHexLen is how many hex digits an inputs hash carries after its prefix.
const hashHexLen = 16

// InputsHash is the template's inputs hash for a workload with revisions on, from the inputs
// record wave writes with the rollout.
func InputsHash(recordValue string) string {
	sum := sha256.Sum256([]byte(recordValue))
	return revisionPrefix + hex.EncodeToString(sum[:hashHexLen/2])
}

// IsRevision tells whether an inputs hash (a pod's or a template's) is one InputsHash makes.
func IsRevision(inputsHash string) bool {
	rest, ok := strings.CutPrefix(inputsHash, revisionPrefix)
	return ok && len(rest) == hashHexLen && strings.Trim(rest, "0123456789abcdef") == ""
}

// IndexName is the name of the index of the revision whose pods carry inputsHash, or "" when
// the hash is not a revision's (then the pods read the live objects).
func IndexName(inputsHash string) string {
	if !IsRevision(inputsHash) {
		return ""
	}
	return "configwave-" + inputsHash
}

// IndexData is the data of an index for snapshots (all in one namespace).
func IndexData(snapshots Snapshots) map[string]string {
	data := make(map[string]string, len(snapshots))
	for ref, snap := range snapshots {
		data[ref.Kind.Lower()+"."+ref.Name] = snap
	}
	return data
}

// ParseIndex reads an index's data back, for the pods of namespace. The data is read from the
// API, where anyone who may write ConfigMaps in the namespace could have written it, so every
// entry is checked: a known kind, and valid names of the source and of the snapshot, which must
// be one of that source (SnapshotName). A bad entry is an error that names it; nothing of it is
// used.
func ParseIndex(namespace string, data map[string]string) (Snapshots, error) {
	out := make(Snapshots, len(data))
	// Sorted: the same message for the same data, whatever the map's order.
	for _, k := range slices.Sorted(maps.Keys(data)) {
		snap := data[k]
		kind, name, ok := strings.Cut(k, ".")
		var ref configref.Ref
		switch kind {
		case configref.ConfigMap.Lower():
			ref = configref.Ref{Kind: configref.ConfigMap, Namespace: namespace, Name: name}
		case configref.Secret.Lower():
			ref = configref.Ref{Kind: configref.Secret, Namespace: namespace, Name: name}
		default:
			ok = false
		}
		if !ok {
			return nil, fmt.Errorf("index entry %q: want configmap.NAME or secret.NAME", k)
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return nil, fmt.Errorf("index entry %q: the source's name is not valid: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsDNS1123Subdomain(snap); len(errs) > 0 {
			return nil, fmt.Errorf("index entry %q: the snapshot's name is not valid: %s", k, strings.Join(errs, "; "))
		}
		if !isSnapshotOf(snap, name) {
			return nil, fmt.Errorf("index entry %q: %q is not a name of a snapshot of %s", k, snap, name)
		}
		out[ref] = snap
	}
	return out, nil
}

// isSnapshotOf tells whether snap has the form SnapshotName gives for source and some ID.
func isSnapshotOf(snap, source string) bool {
	i := strings.LastIndexByte(snap, '-')
	if i < 0 || len(snap)-i-1 != contentIDLen {
		return false
	}
	id := snap[i+1:]
	for _, c := range id {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return SnapshotName(source, id) == snap
}
