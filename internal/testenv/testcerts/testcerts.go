// Package testcerts makes certificates for tests: a CA that issues server and client
// certificates, or a self-signed pair, all in PEM, valid for an hour either side of now.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// CA signs certificates.
type CA struct {
	Cert *x509.Certificate
	PEM  []byte
	key  *ecdsa.PrivateKey
}

// NewCA makes a CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	tmpl := template(name)
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	certPEM, key, cert := create(t, tmpl, nil, nil)
	return &CA{Cert: cert, PEM: certPEM, key: key}
}

// Server issues a certificate for 127.0.0.1 and the DNS name cn.
func (ca *CA) Server(t testing.TB, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	tmpl := template(cn)
	tmpl.ExtKeyUsage, tmpl.IPAddresses, tmpl.DNSNames = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []net.IP{net.ParseIP("127.0.0.1")}, []string{cn}
	certPEM, key, _ := create(t, tmpl, ca.Cert, ca.key)
	return certPEM, encodeKey(t, key)
}

// Client issues a client certificate named cn.
func (ca *CA) Client(t testing.TB, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	tmpl := template(cn)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	certPEM, key, _ := create(t, tmpl, ca.Cert, ca.key)
	return certPEM, encodeKey(t, key)
}

// SelfSigned is a certificate for the DNS name cn that signs itself: its own CA file.
func SelfSigned(t testing.TB, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	tmpl := template(cn)
	tmpl.DNSNames = []string{cn}
	certPEM, key, _ := create(t, tmpl, nil, nil)
	return certPEM, encodeKey(t, key)
}

func template(cn string) *x509.Certificate {
	return &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
}

// create signs tmpl with parent's key, or with its own new key when parent is nil.
func create(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) ([]byte, *ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key, cert
}

func encodeKey(t testing.TB, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}
