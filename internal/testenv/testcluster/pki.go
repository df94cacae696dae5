package testcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the key material one cluster needs, written under dir.
type pki struct {
	CACert      []byte // PEM; clients trust this
	CAFile      string
	ServingCert string // kube-apiserver serving certificate for 127.0.0.1 and localhost
	ServingKey  string
	SAKey       string // service-account token signing key (RSA, PEM)
	SAPub       string
	// The API server's client certificate for kubelet (logs, exec, port-forward): the real
	// node's kubelet lets in no one else. Its user has no rights in the API.
	KubeletClientCert string
	KubeletClientKey  string
}

// newPKI writes a throw-away CA, a serving certificate for loopback, the API server's client
// certificate for kubelet, and a service-account signing key pair. Generated per cluster so
// nothing secret is committed or shared; the CA's key is never written, so nothing else is
// ever signed by it.
func newPKI(dir string) (*pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "configwave-testcluster-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour * 365),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	caCert, _ := x509.ParseCertificate(caDER)

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate serving key: %w", err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour * 365),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.ParseIP(APIServiceIP)}, // the last for the real node's pods
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create serving certificate: %w", err)
	}

	kcKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate kubelet client key: %w", err)
	}
	kcTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "configwave-apiserver-kubelet-client"}, // no group: no rights in the API
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour * 365),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	kcDER, err := x509.CreateCertificate(rand.Reader, kcTmpl, caCert, &kcKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create kubelet client certificate: %w", err)
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}

	p := &pki{
		CACert:      pemBlock("CERTIFICATE", caDER),
		CAFile:      filepath.Join(dir, "ca.crt"),
		ServingCert: filepath.Join(dir, "apiserver.crt"),
		ServingKey:  filepath.Join(dir, "apiserver.key"),
		SAKey:       filepath.Join(dir, "sa.key"),
		SAPub:       filepath.Join(dir, "sa.pub"),

		KubeletClientCert: filepath.Join(dir, "apiserver-kubelet-client.crt"),
		KubeletClientKey:  filepath.Join(dir, "apiserver-kubelet-client.key"),
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return nil, fmt.Errorf("encode serving key: %w", err)
	}
	kcKeyDER, err := x509.MarshalECPrivateKey(kcKey)
	if err != nil {
		return nil, fmt.Errorf("encode kubelet client key: %w", err)
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encode service-account public key: %w", err)
	}
	files := map[string][]byte{
		p.CAFile:      p.CACert,
		p.ServingCert: pemBlock("CERTIFICATE", srvDER),
		p.ServingKey:  pemBlock("EC PRIVATE KEY", srvKeyDER),
		p.SAKey:       pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)),
		p.SAPub:       pemBlock("PUBLIC KEY", saPubDER),

		p.KubeletClientCert: pemBlock("CERTIFICATE", kcDER),
		p.KubeletClientKey:  pemBlock("EC PRIVATE KEY", kcKeyDER),
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", filepath.Base(path), err)
		}
	}
	return p, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
