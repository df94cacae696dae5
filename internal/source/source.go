// Package source finds the config an app reads and hands out complete, consistent snapshots of
// it. Each kind of source is one file: api.go reads named or label-selected ConfigMaps and
// Secrets from the Kubernetes API; a new kind of source is a new file whose type has the same
// four methods (Run, WaitForSync, Changed, Snapshot).
//
//	w := source.NewAPI(coreV1Client, []source.Ref{{Kind: source.ConfigMap, Namespace: "web", Name: "nginx"}}, nil, source.APIOptions{})
//	go w.Run(ctx)
//	<-w.Changed(); snap := w.Snapshot()
//
// A consumer that takes a Snapshot after every Changed signal never misses the latest state,
// whatever events were merged or replayed on the way: a signal only says "look again".
package source

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
)

// Kind is the kind of a config object.
type Kind string

const (
	ConfigMap Kind = "ConfigMap"
	Secret    Kind = "Secret"
)

func (k Kind) resource() string {
	if k == Secret {
		return "secrets"
	}
	return "configmaps"
}

// Ref names one ConfigMap or Secret.
type Ref struct {
	Kind      Kind
	Namespace string
	Name      string
}

// String is how the object is named in logs and errors: "configmap web/nginx".
func (r Ref) String() string {
	if r.Kind == Folder {
		return "folder " + r.Name
	}
	return fmt.Sprintf("%s %s/%s", lowerKind(r.Kind), r.Namespace, r.Name)
}

func lowerKind(k Kind) string {
	switch k {
	case Secret:
		return "secret"
	case Folder:
		return "folder"
	}
	return "configmap"
}

// Selector selects every object of the given kinds whose labels match, in one namespace or,
// when Namespace is empty, in all of them.
type Selector struct {
	Kinds     []Kind
	Namespace string
	Labels    labels.Selector
}

// Object is one ConfigMap or Secret as the app sees it: every key of data and binaryData
// (ConfigMap) or data (Secret), byte-exact. The API server rejects a ConfigMap whose data and
// binaryData share a key, so merging them loses nothing.
type Object struct {
	Ref
	Data map[string][]byte
}

// Snapshot is the current state of every source.
type Snapshot struct {
	Objects []Object // sorted by kind, namespace, name
	Missing []Ref    // named objects that do not exist (yet)
}
