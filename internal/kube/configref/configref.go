// Package configref names one ConfigMap or Secret. Both binaries use this one model: the
// reloader for what it watches (with Folder, a source of its own, as a third kind), wave for
// what a pod template uses and what a record covers. DefaultNamespace is the namespace a
// reference without one means: the pod's own.
//
//	r := configref.Ref{Kind: configref.Secret, Namespace: "web", Name: "tls"}
//	r.String()     // "secret web/tls"
//	r.Short("web") // "secret/tls"; "secret/web/tls" from another namespace
package configref

import (
	"cmp"
	"strings"
)

// Kind is ConfigMap or Secret (or a kind a package adds for its own sources).
type Kind string

const (
	ConfigMap Kind = "ConfigMap"
	Secret    Kind = "Secret"
	// SecretProviderClass (secrets-store.csi.x-k8s.io) stands for the objects a Secrets Store
	// CSI driver mounted for it: wave follows their versions, as its pods' statuses report
	// them, with Reloader's --enable-csi-integration.
	SecretProviderClass Kind = "SecretProviderClass"
)

// Lower is the kind as it appears in logs, Events and records: "configmap", "secret".
func (k Kind) Lower() string { return strings.ToLower(string(k)) }

// Resource is the API resource of the kind: "configmaps", "secrets".
func (k Kind) Resource() string { return k.Lower() + "s" }

// Ref names one object. A kind without namespaces (a folder) leaves Namespace empty.
type Ref struct {
	Kind      Kind
	Namespace string
	Name      string
}

// String is how the object is named in logs, Events and errors: "configmap web/nginx", or
// "folder /etc/app" for a Ref without a namespace.
func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind.Lower() + " " + r.Name
	}
	return r.Kind.Lower() + " " + r.Namespace + "/" + r.Name
}

// Short names the object as seen from namespace: "configmap/NAME", or "configmap/NS/NAME" when
// it lives in another namespace. Records and status rows use it.
func (r Ref) Short(namespace string) string {
	if r.Namespace != namespace {
		return r.Kind.Lower() + "/" + r.Namespace + "/" + r.Name
	}
	return r.Kind.Lower() + "/" + r.Name
}

// Compare orders refs by kind, namespace, then name, for stable output (slices.SortFunc).
func Compare(a, b Ref) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}
