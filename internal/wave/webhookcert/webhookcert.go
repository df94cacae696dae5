// Package webhookcert keeps the certificate of the revisions webhook where no cert-manager
// does (--revisions-webhook-cert-secret): a CA and a serving certificate for the webhook's
// Service, in one Secret in wave's namespace, made by whichever replica comes first and
// renewed before either expires, and the CA in the MutatingWebhookConfiguration's caBundle, so
// that the API server trusts what every replica serves. What to make is decided here, from the
// Secret's data and the clock (Decide, Make); Keeper reads the Secret and writes.
package webhookcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The Secret's keys: a kubernetes.io/tls Secret's two, and the CA beside them, its key too, so
// that any replica can renew the serving certificate under the CA the API server trusts; and
// the CA before it, which stays in the caBundle after a new CA is made, so that a replica
// still serving a certificate under it is trusted until it looks at the Secret again.
const (
	CACertKey         = "ca.crt"
	CAKeyKey          = "ca.key"
	PreviousCACertKey = "ca-previous.crt"
)

// Lifetimes, and how long before its end each is made again. A new CA changes the caBundle,
// which the API server takes up within seconds; until then its calls fail, and the webhook's
// failurePolicy Ignore admits pods unchanged, on the live objects. So the CA lasts long and is
// renewed a year early; the serving certificate, signed by the same CA, is renewed freely.
const (
	CAValidity         = 10 * 365 * 24 * time.Hour
	CARenewBefore      = 365 * 24 * time.Hour
	ServingValidity    = 365 * 24 * time.Hour
	ServingRenewBefore = 30 * 24 * time.Hour
	// backdate: a node's clock a little behind ours still finds the certificate valid.
	backdate = time.Hour
)

// Action is what the Secret needs.
type Action int

const (
	Keep       Action = iota // both certificates are good
	NewServing               // the CA is good; the serving certificate is made again under it
	NewAll                   // a new CA, and a serving certificate under it
)

func (a Action) String() string { return [...]string{"keep", "new serving certificate", "new CA"}[a] }

// Decide says what data (a Secret's, nil when there is none) needs for a webhook reached as
// dnsNames at now, and why, in a few words that name no key.
func Decide(data map[string][]byte, dnsNames []string, now time.Time) (Action, string) {
	ca, _, err := parsePair(data[CACertKey], data[CAKeyKey])
	switch {
	case err != nil:
		return NewAll, "no usable CA (" + err.Error() + ")"
	case !ca.IsCA:
		return NewAll, "its CA certificate is not a CA"
	// (A CA not valid yet by this clock is another replica's clock ahead: kept, not replaced.)
	case ca.NotAfter.Sub(now) < CARenewBefore:
		return NewAll, fmt.Sprintf("its CA expires %s", ca.NotAfter.UTC().Format(time.DateOnly))
	}
	leaf, _, err := parsePair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return NewServing, "no usable serving certificate (" + err.Error() + ")"
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range dnsNames {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, CurrentTime: now}); err != nil {
			return NewServing, fmt.Sprintf("its serving certificate does not serve %s under its CA", name)
		}
	}
	if leaf.NotAfter.Sub(now) < ServingRenewBefore {
		return NewServing, fmt.Sprintf("its serving certificate expires %s", leaf.NotAfter.UTC().Format(time.DateOnly))
	}
	return Keep, ""
}

// Make returns the Secret's data after a: data with a new serving certificate (for
// NewServing, under data's CA), or all new (NewAll). Keep returns data as it is.
func Make(a Action, data map[string][]byte, dnsNames []string, now time.Time) (map[string][]byte, error) {
	if a == Keep {
		return data, nil
	}
	out := map[string][]byte{}
	var ca *x509.Certificate
	var caKey *ecdsa.PrivateKey
	if a == NewServing {
		c, k, err := parsePair(data[CACertKey], data[CAKeyKey])
		if err != nil {
			return nil, fmt.Errorf("renew the serving certificate under its CA: %w", err)
		}
		ca, caKey = c, k
		for _, key := range []string{CACertKey, CAKeyKey, PreviousCACertKey} {
			if v, ok := data[key]; ok {
				out[key] = v
			}
		}
	} else {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("make the CA's key: %w", err)
		}
		tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: "configwave revisions webhook CA"}, IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, NotBefore: now.Add(-backdate), NotAfter: now.Add(CAValidity)}
		der, err := sign(tmpl, tmpl, &k.PublicKey, k)
		if err != nil {
			return nil, fmt.Errorf("make the CA: %w", err)
		}
		if ca, err = x509.ParseCertificate(der); err != nil {
			return nil, err
		}
		caKey = k
		if out[CACertKey], out[CAKeyKey], err = encode(der, k); err != nil {
			return nil, err
		}
		if old, _, err := parsePair(data[CACertKey], data[CAKeyKey]); err == nil && old.IsCA && now.Before(old.NotAfter) {
			out[PreviousCACertKey] = data[CACertKey]
		}
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("make the serving key: %w", err)
	}
	cn := ""
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	der, err := sign(&x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: dnsNames, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, NotBefore: now.Add(-backdate), NotAfter: now.Add(ServingValidity)}, ca, &k.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("make the serving certificate: %w", err)
	}
	if out[corev1.TLSCertKey], out[corev1.TLSPrivateKeyKey], err = encode(der, k); err != nil {
		return nil, err
	}
	return out, nil
}

// Bundle is the caBundle for data: its CA, and the CA before it while that one is valid.
func Bundle(data map[string][]byte, now time.Time) []byte {
	out := append([]byte{}, data[CACertKey]...)
	if prev := data[PreviousCACertKey]; len(prev) > 0 {
		if b, _ := pem.Decode(prev); b != nil {
			if c, err := x509.ParseCertificate(b.Bytes); err == nil && now.Before(c.NotAfter) {
				out = append(out, prev...)
			}
		}
	}
	return out
}

func sign(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, key *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
}

func encode(der []byte, key *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	k, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k}), nil
}

// parsePair reads a PEM certificate and its ECDSA key, and checks that they belong together.
func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, fmt.Errorf("not an ECDSA key")
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}
