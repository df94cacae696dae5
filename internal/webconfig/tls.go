package webconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
)

// errNoTLS: the file sets no TLS key at all, so the endpoint is served as plain HTTP (basic auth
// and headers still apply).
var errNoTLS = errors.New("TLS config is not present")

func (t *tlsServerConfig) enabled() bool {
	return t.CertFile != "" || t.Cert != "" || t.KeyFile != "" || t.Key != "" ||
		t.ClientCAFile != "" || t.ClientCA != "" || t.ClientAuth != ""
}

// tlsConfig makes the server's TLS config, after checking that the certificate and key load.
// The certificate is read again for every handshake.
func (t *tlsServerConfig) tlsConfig() (*tls.Config, error) {
	if !t.enabled() {
		return nil, errNoTLS
	}
	if t.CertFile == "" && t.Cert == "" {
		return nil, errors.New("missing one of cert or cert_file")
	}
	if t.KeyFile == "" && t.Key == "" {
		return nil, errors.New("missing one of key or key_file")
	}
	if _, err := t.loadCert(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:     uint16(t.MinVersion),
		MaxVersion:     uint16(t.MaxVersion),
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return t.loadCert() },
	}
	for _, c := range t.CipherSuites {
		cfg.CipherSuites = append(cfg.CipherSuites, uint16(c))
	}
	for _, c := range t.Curves {
		cfg.CurvePreferences = append(cfg.CurvePreferences, tls.CurveID(c))
	}
	switch {
	case t.ClientCAFile != "":
		pem, err := os.ReadFile(t.ClientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = x509.NewCertPool()
		cfg.ClientCAs.AppendCertsFromPEM(pem)
	case t.ClientCA != "":
		cfg.ClientCAs = x509.NewCertPool()
		cfg.ClientCAs.AppendCertsFromPEM([]byte(t.ClientCA))
	}
	if t.ClientAllowedSANs != nil {
		cfg.VerifyPeerCertificate = t.verifySAN
	}
	switch t.ClientAuth {
	case "RequestClientCert":
		cfg.ClientAuth = tls.RequestClientCert
	case "RequireAnyClientCert", "RequireClientCert": // the second is the toolkit's old name
		cfg.ClientAuth = tls.RequireAnyClientCert
	case "VerifyClientCertIfGiven":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case "RequireAndVerifyClientCert":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	case "", "NoClientCert":
		cfg.ClientAuth = tls.NoClientCert
	default:
		return nil, errors.New("invalid ClientAuth: " + t.ClientAuth)
	}
	if (t.ClientCAFile != "" || t.ClientCA != "") && cfg.ClientAuth == tls.NoClientCert {
		return nil, errors.New("client CA's have been configured without a Client Auth Policy")
	}
	return cfg, nil
}

func (t *tlsServerConfig) loadCert() (*tls.Certificate, error) {
	certPEM, keyPEM := []byte(t.Cert), []byte(t.Key)
	var err error
	if t.CertFile != "" {
		if certPEM, err = os.ReadFile(t.CertFile); err != nil {
			return nil, fmt.Errorf("failed to read cert_file (%s): %s", t.CertFile, err)
		}
	}
	if t.KeyFile != "" {
		if keyPEM, err = os.ReadFile(t.KeyFile); err != nil {
			return nil, fmt.Errorf("failed to read key_file (%s): %s", t.KeyFile, err)
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("failed to load X509KeyPair: %w", err)
	}
	return &cert, nil
}

// verifySAN accepts a client certificate that names one of client_allowed_sans: a DNS name, an
// e-mail address, an IP address or a URI.
func (t *tlsServerConfig) verifySAN(raw [][]byte, _ [][]*x509.Certificate) error {
	cert, err := x509.ParseCertificate(raw[0]) // the client's own comes first
	if err != nil {
		return fmt.Errorf("error parsing client certificate: %s", err)
	}
	sans := slices.Concat(cert.DNSNames, cert.EmailAddresses)
	for _, ip := range cert.IPAddresses {
		sans = append(sans, ip.String())
	}
	for _, u := range cert.URIs {
		sans = append(sans, u.String())
	}
	for _, s := range sans {
		if slices.Contains(t.ClientAllowedSANs, s) {
			return nil
		}
	}
	return fmt.Errorf("could not find allowed SANs in client cert, found: %v", t.ClientAllowedSANs)
}
