// Package source holds what every source of config hands out, complete and consistent
// snapshots of the objects an app reads (Object, Snapshot), the references and selectors that
// name them, and the folder source: the folders kubelet, a CSI driver or cert-manager mounts,
// watched with fsnotify and read with no API access. The API source is apisource, a package of
// its own so that the file-only build of the reloader links no API client. A source has four
// methods: Run, WaitForSync, Changed and Snapshot.
//
// A consumer that takes a Snapshot after every Changed signal never misses the latest state,
// whatever events were merged or replayed on the way: a signal only says "look again".
package source

import (
	"github.com/configwave/configwave/internal/kube/configref"
)

// Selector selects every object of the given kinds whose labels match, in the namespaces
// listed or, when none is, in all of them.
type Selector struct {
	Kinds      []configref.Kind
	Namespaces []string
	// Labels is a label selector as the API's labelSelector takes it, checked and
	// not empty (the reloader's flag check parses it).
	Labels string
}

// Object is one ConfigMap or Secret as the app sees it: every key of data and binaryData
// (ConfigMap) or data (Secret), byte-exact. The API server rejects a ConfigMap whose data and
// binaryData share a key, so merging them loses nothing.
type Object struct {
	configref.Ref
	Data map[string][]byte
	// Annotations are those of apisource.Options.Annotations the object carries; nil without any.
	Annotations map[string]string
	// Version names the exact content read. For a folder that kubelet's atomic writer swaps,
	// the ..data target its files were read through (Swap), when the names in the folder were
	// those of that set; "" otherwise (a plain folder, or kubelet between the swap and its
	// names). For an object from the API, its UID and resourceVersion ("UID/RV").
	Version string
}

// Snapshot is the current state of every source.
type Snapshot struct {
	Objects []Object        // sorted by kind, namespace, name
	Missing []configref.Ref // named objects that do not exist (yet)
}
