package notify

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// TLSFiles is how a reload request over https checks the app's certificate and proves its own.
// The files are read again for every request, so that a certificate cert-manager or a CSI
// driver rotates is used at once, with no restart. Nothing from them is ever shown.
type TLSFiles struct {
	CAFile   string // PEM bundle that signed the app's certificate; empty: the system's roots
	CertFile string // client certificate (PEM), with KeyFile
	KeyFile  string
	// InsecureSkipVerify accepts any certificate the app shows. Only ever set by an explicit flag
	// (or for prometheus-config-reloader's loopback URLs, which it never verifies).
	InsecureSkipVerify bool
}

// Config reads the files into a TLS configuration. Errors name the flag and the file.
func (t *TLSFiles) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // explicit flag
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--reload-http-ca-file: read %s: %w (is the Secret mounted there?)", t.CAFile, errors.Unwrap(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--reload-http-ca-file: %s holds no PEM certificate; give the CA certificate (ca.crt) that signed the app's certificate", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		if t.CertFile == "" || t.KeyFile == "" {
			return nil, fmt.Errorf("--reload-http-cert-file and --reload-http-key-file go together: give both, or neither")
		}
		// The pair is read whole for every request; a rotation that replaced one file and not yet
		// the other fails this try, and the next try reads both again.
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--reload-http-cert-file=%s and --reload-http-key-file=%s: %w", t.CertFile, t.KeyFile, keyPairError(err))
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// keyPairError keeps crypto/tls's reason but never anything read from the files: a parse
// error of the key file must not quote it.
func keyPairError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("read %s: %w (is the Secret mounted there?)", pe.Path, pe.Err)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "private key does not match public key"):
		return errors.New("the key does not belong to the certificate (a rotation half done? both are read again on the next try)")
	case strings.Contains(msg, "failed to find any PEM data in key input"), strings.Contains(msg, "failed to parse private key"):
		return errors.New("no PEM private key in the key file")
	case strings.Contains(msg, "failed to find any PEM data in certificate input"), strings.Contains(msg, "failed to find certificate PEM data"):
		return errors.New("no PEM certificate in the certificate file")
	}
	return errors.New("not a usable certificate and key in PEM")
}

// clientFor is the client for one request: the given one, else for an https URL with t set a
// reload client (see NewClient) with the files read now, else the default.
func (t *TLSFiles) clientFor(given *http.Client, req *http.Request) (*http.Client, error) {
	switch {
	case given != nil:
		return given, nil
	case t == nil || req.URL.Scheme != "https":
		return defaultClient, nil
	}
	cfg, err := t.Config()
	if err != nil {
		return nil, err
	}
	c := NewClient()
	c.Transport.(*http.Transport).TLSClientConfig = cfg
	return c, nil
}

// tlsHint says what to do when the app's certificate is not trusted.
func tlsHint(err error) string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	switch {
	case errors.As(err, &unknown):
		return " (the app's certificate is not signed by a trusted CA: pass --reload-http-ca-file with the CA that signed it)"
	case errors.As(err, &host):
		return " (the app's certificate is not for this host name: use a host name it lists in --reload-http)"
	case strings.Contains(err.Error(), "certificate required"), strings.Contains(err.Error(), "bad certificate"):
		return " (the app asks for a client certificate: pass --reload-http-cert-file and --reload-http-key-file)"
	}
	return ""
}
