package notify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/testenv/testcerts"
)

// tlsApp is an https reload endpoint with a certificate from ca; with clients set, it asks for
// a client certificate signed by clients. It records the client's name.
func tlsApp(t *testing.T, ca, clients *testcerts.CA) (srv *httptest.Server, clientName chan string) {
	t.Helper()
	certPEM, keyPEM := ca.Server(t, "app")
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	clientName = make(chan string, 10)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := ""
		if len(r.TLS.PeerCertificates) > 0 {
			name = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		clientName <- name
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	if clients != nil {
		pool := x509.NewCertPool()
		pool.AddCert(clients.Cert)
		srv.TLS.ClientCAs, srv.TLS.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, clientName
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, b, 0o600))
	return p
}

func TestReloadOverTLS(t *testing.T) {
	ca, clients, other := testcerts.NewCA(t, "app-ca"), testcerts.NewCA(t, "client-ca"), testcerts.NewCA(t, "other-ca")
	dir := t.TempDir()
	caFile, otherCAFile := writeFile(t, dir, "ca.crt", ca.PEM), writeFile(t, dir, "other.crt", other.PEM)
	certPEM, keyPEM := clients.Client(t, "reloader")
	certFile, keyFile := writeFile(t, dir, "tls.crt", certPEM), writeFile(t, dir, "tls.key", keyPEM)
	const secret = "not-a-key-s3cr3t"
	junkKey := writeFile(t, dir, "junk.key", []byte(secret))
	junkCA := writeFile(t, dir, "junk.crt", []byte(secret))

	tests := []struct {
		name       string
		clientAuth bool
		tls        *TLSFiles
		wantErr    string // "" → success
		wantClient string
	}{
		{name: "CA file trusts the app", tls: &TLSFiles{CAFile: caFile}},
		{name: "without TLS settings the system roots do not", tls: nil, wantErr: "--reload-http-ca-file with the CA that signed it"},
		{name: "a CA that did not sign it", tls: &TLSFiles{CAFile: otherCAFile}, wantErr: "--reload-http-ca-file with the CA that signed it"},
		{name: "skip-verify only when asked", tls: &TLSFiles{InsecureSkipVerify: true}},
		{name: "client certificate sent", clientAuth: true, tls: &TLSFiles{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}, wantClient: "reloader"},
		{name: "client certificate missing", clientAuth: true, tls: &TLSFiles{CAFile: caFile}, wantErr: "--reload-http-cert-file and --reload-http-key-file)"},
		{name: "cert without key", tls: &TLSFiles{CAFile: caFile, CertFile: certFile}, wantErr: "go together: give both"},
		{name: "key file holds no key", tls: &TLSFiles{CAFile: caFile, CertFile: certFile, KeyFile: junkKey}, wantErr: "no PEM private key in the key file"},
		{name: "CA file holds no certificate", tls: &TLSFiles{CAFile: junkCA}, wantErr: "junk.crt holds no PEM certificate"},
		{name: "CA file missing", tls: &TLSFiles{CAFile: filepath.Join(dir, "absent.crt")}, wantErr: "absent.crt: no such file or directory (is the Secret mounted there?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want *testcerts.CA
			if tt.clientAuth {
				want = clients
			}
			srv, seen := tlsApp(t, ca, want)
			h := &HTTP{URL: srv.URL + "/-/reload", TLS: tt.tls, Backoff: fastBackoff}
			h.Backoff.Steps = 1
			err := h.Notify(context.Background())
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.NotContains(t, err.Error(), secret)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantClient, <-seen)
		})
	}
}

// A CA bundle cert-manager rotates is read again for the next request: no restart.
func TestReloadOverTLSReadsFilesEachTime(t *testing.T) {
	ca, other := testcerts.NewCA(t, "app-ca"), testcerts.NewCA(t, "other-ca")
	caFile := writeFile(t, t.TempDir(), "ca.crt", other.PEM)
	srv, _ := tlsApp(t, ca, nil)
	h := &HTTP{URL: srv.URL, TLS: &TLSFiles{CAFile: caFile}, Backoff: fastBackoff}
	h.Backoff.Steps = 1
	require.Error(t, h.Notify(context.Background()), "the app's CA is not trusted yet")
	require.NoError(t, os.WriteFile(caFile, ca.PEM, 0o600))
	require.NoError(t, h.Notify(context.Background()), "the rotated CA file is read for the next request")
}

// Plain http ignores the TLS settings, whatever files they name.
func TestTLSFilesIgnoredForPlainHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	h := &HTTP{URL: srv.URL, TLS: &TLSFiles{CAFile: "/does/not/exist"}, Backoff: fastBackoff}
	require.NoError(t, h.Notify(context.Background()))
}
