package revisions

import (
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

// indexPrefix starts every index's name.
const indexPrefix = "configwave-revision-"

// IndexName is the name of the index of the revision whose pods carry inputsHash, or "" when
// the annotation's value cannot be part of a name (then the pods read the live objects).
func IndexName(inputsHash string) string {
	if inputsHash == "" || strings.Trim(inputsHash, "0123456789abcdefghijklmnopqrstuvwxyz-") != "" {
		return ""
	}
	name := indexPrefix + inputsHash
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return ""
	}
	return name
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
