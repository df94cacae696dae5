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

// errUnverifiedSANs refuses client_allowed_sans where no client certificate is verified against a
// client CA. The toolkit accepts such a file; we deliberately do not: a SAN is only a claim until
// a CA the server trusts has signed it, and anyone can make a self-signed certificate naming any
// SAN, so with RequestClientCert or RequireAnyClientCert the list would let in whoever read it,
// and with NoClientCert (no certificate asked for) or without TLS it would never be checked at all.
// A Verify* type without client_ca_file or client_ca verifies against the system's public roots,
// which sign certificates for anyone's own names. Verifying the chain ourselves under the
// unverified types was the other way; refusing is safer: it keeps the meaning of the type's name
// (a RequestClientCert server that verifies is a surprise), it is what the user meant (an
// allowlist of verified clients), and the start fails loudly instead of letting clients in. The
// Prometheus Operator's web TLS settings have no client_allowed_sans, so no file it writes is
// refused.
var errUnverifiedSANs = errors.New("a client certificate's SANs are only trusted once it is verified against client_ca_file or client_ca")

func (t *tlsServerConfig) enabled() bool {
	return t.CertFile != "" || t.Cert != "" || t.KeyFile != "" || t.Key != "" ||
		t.ClientCAFile != "" || t.ClientCA != "" || t.ClientAuth != ""
}

// tlsConfig makes the server's TLS config, after checking that the certificate and key load.
// The certificate is read again for every handshake.
func (t *tlsServerConfig) tlsConfig() (*tls.Config, error) {
	if !t.enabled() {
		if t.ClientAllowedSANs != nil {
			return nil, fmt.Errorf("tls_server_config: client_allowed_sans without TLS, so no client certificate is asked for: %w; set cert_file, key_file, client_auth_type: RequireAndVerifyClientCert and client_ca_file", errUnverifiedSANs)
		}
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
		// VerifyConnection, not VerifyPeerCertificate as in the toolkit: crypto/tls calls it on
		// resumed sessions too (where it calls VerifyPeerCertificate never, so a SAN taken off the
		// list would keep its client in for the session ticket's life), and it hands over only the
		// chains crypto/tls verified, never a certificate the client merely sent.
		cfg.VerifyConnection = t.verifySANs
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
	// Last, so that a file the toolkit refuses is refused with the toolkit's message.
	if err := t.checkSANs(cfg.ClientAuth); err != nil {
		return nil, err
	}
	return cfg, nil
}

// checkSANs refuses client_allowed_sans with a client auth type that leaves the certificate
// unverified, or verified against no CA of the file's (errUnverifiedSANs says why).
func (t *tlsServerConfig) checkSANs(auth tls.ClientAuthType) error {
	if t.ClientAllowedSANs == nil {
		return nil
	}
	authType := t.ClientAuth
	if authType == "" {
		authType = "NoClientCert"
	}
	const fix = "set client_auth_type: RequireAndVerifyClientCert (or VerifyClientCertIfGiven) and client_ca_file to the CA that signs the clients' certificates"
	switch {
	case auth < tls.VerifyClientCertIfGiven:
		return fmt.Errorf("tls_server_config: client_allowed_sans with client_auth_type %s, which verifies no client certificate: %w; %s", authType, errUnverifiedSANs, fix)
	case t.ClientCAFile == "" && t.ClientCA == "":
		return fmt.Errorf("tls_server_config: client_allowed_sans with client_auth_type %s and neither client_ca_file nor client_ca, which verifies clients against the system's public CAs: %w; %s", authType, errUnverifiedSANs, fix)
	}
	return nil
}

func (t *tlsServerConfig) loadCert() (*tls.Certificate, error) {
	certPEM, keyPEM := []byte(t.Cert), []byte(t.Key)
	var err error
	if t.CertFile != "" {
		if certPEM, err = os.ReadFile(t.CertFile); err != nil {
			return nil, fmt.Errorf("failed to read cert_file (%s): %w", t.CertFile, err)
		}
	}
	if t.KeyFile != "" {
		if keyPEM, err = os.ReadFile(t.KeyFile); err != nil {
			return nil, fmt.Errorf("failed to read key_file (%s): %w", t.KeyFile, err)
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("failed to load X509KeyPair: %w", err)
	}
	return &cert, nil
}

// verifySANs accepts a connection whose client certificate verified against the client CA and
// names one of client_allowed_sans: a DNS name, an e-mail address, an IP address or a URI. A
// client that sent no certificate (VerifyClientCertIfGiven asks for one without requiring it) is
// refused like one whose SANs are not on the list.
func (t *tlsServerConfig) verifySANs(cs tls.ConnectionState) error {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return errors.New("client_allowed_sans is set and the client has no certificate verified against the client CA")
	}
	cert := cs.VerifiedChains[0][0] // every verified chain starts with the client's own certificate
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
	return fmt.Errorf("the client certificate names none of client_allowed_sans %v", t.ClientAllowedSANs)
}
