package apisource

import (
	"fmt"
	"strings"

	"github.com/configwave/configwave/internal/kube/configref"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ParseRef parses the value of --configmap or --secret, [NAMESPACE/]NAME; the namespace
// defaults to defaultNamespace.
func ParseRef(kind configref.Kind, s, defaultNamespace string) (configref.Ref, error) {
	flag := "--" + kind.Lower()
	ns, name := defaultNamespace, s
	if i := strings.IndexByte(s, '/'); i >= 0 {
		ns, name = s[:i], s[i+1:]
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return configref.Ref{}, fmt.Errorf("%s=%q: namespace %q is not valid (%s); use [NAMESPACE/]NAME", flag, s, ns, strings.Join(errs, "; "))
		}
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return configref.Ref{}, fmt.Errorf("%s=%q: name %q is not a valid %s name (%s); use [NAMESPACE/]NAME", flag, s, name, kind.Lower(), strings.Join(errs, "; "))
	}
	return configref.Ref{Kind: kind, Namespace: ns, Name: name}, nil
}
