// Package sourceready says whether a ConfigMap or Secret that a workload follows holds a
// complete content, one a pod can start on: a Secret with a certificate and its key
// (kubernetes.io/tls, as cert-manager and most tools write them) whose two halves do not match
// is a renewal half-written (the certificate of one issuance beside the key of another), and
// rolling it would start every new pod on a pair its TLS library refuses. wave holds a
// rollout while a source it follows is incomplete, for a bounded time (--source-ready-timeout).
//
// Incomplete is computed where wave sees a Secret whole, in its informers' transform, and only
// its answer is kept: never a value, nor anything that lets a reader test a guess about one.
package sourceready

import (
	"crypto/tls"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Incomplete says why a Secret's content is not complete, or "": a TLS Secret (its type, or
// both keys present) whose tls.crt and tls.key are not a matching pair. The reason names keys
// and what is wrong with them, never their content.
func Incomplete(typ corev1.SecretType, data map[string][]byte) string {
	crt, hasCrt := data[corev1.TLSCertKey]
	key, hasKey := data[corev1.TLSPrivateKeyKey]
	if typ != corev1.SecretTypeTLS && !(hasCrt && hasKey) {
		return ""
	}
	switch {
	case len(crt) == 0 && len(key) == 0:
		return "" // made empty, to be filled: nothing half-written (an app cannot start on it either way)
	case len(crt) == 0:
		return "tls.key is there and tls.crt is empty"
	case len(key) == 0:
		return "tls.crt is there and tls.key is empty"
	}
	if _, err := tls.X509KeyPair(crt, key); err != nil {
		return "tls.crt and tls.key are not a pair (" + reason(err) + ")"
	}
	return ""
}

// reason is the part of the TLS library's error that says what is wrong: its messages name the
// problem (no PEM data, a key that does not match), never the data.
func reason(err error) string {
	return strings.TrimPrefix(err.Error(), "tls: ")
}
