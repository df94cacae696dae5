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
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Incomplete says why a Secret's content is not complete, or "": a TLS Secret (its type, or
// both keys present) with one half empty, or whose certificate and key both parse and are not a
// pair. What does not parse is not judged (an encrypted key, a kind of key Go does not read):
// only a pair wave can read is a pair it can call broken. The reason is one of a few fixed
// phrases: nothing of the data, nor of the errors that quote it.
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
	leaf, ok := firstCertificate(crt)
	if !ok {
		return ""
	}
	priv, ok := privateKey(key)
	if !ok {
		return ""
	}
	if pub, ok := priv.Public().(interface{ Equal(crypto.PublicKey) bool }); ok && !pub.Equal(leaf.PublicKey) {
		return "tls.crt and tls.key are not a pair (the key is not the certificate's)"
	}
	return ""
}

// firstCertificate is the first certificate of a PEM bundle: the leaf, as a TLS server serves it.
func firstCertificate(b []byte) (*x509.Certificate, bool) {
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			return nil, false
		}
		if block.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(block.Bytes)
			return c, err == nil
		}
	}
}

// privateKey is the first private key of a PEM file, in any form crypto/tls reads.
func privateKey(b []byte) (crypto.Signer, bool) {
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			return nil, false
		}
		if block.Type != "PRIVATE KEY" && !strings.HasSuffix(block.Type, " PRIVATE KEY") {
			continue
		}
		if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
			return k, true
		}
		if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
			return k, true
		}
		if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
			s, ok := k.(crypto.Signer)
			return s, ok
		}
		return nil, false
	}
}
