package webconfig

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

// toolkitTestdata is the exporter-toolkit's own test data: the files its tests accept and refuse,
// and the certificates they name.
func toolkitTestdata(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/prometheus/exporter-toolkit").Output()
	require.NoError(t, err, "find the exporter-toolkit module (a test dependency)")
	return filepath.Join(strings.TrimSpace(string(out)), "web", "testdata")
}

// Every file of the toolkit's test data is accepted or refused here as the toolkit does, with
// the toolkit's very message, but for the deliberate differences (differences_test.go).
func TestAcceptsAndRefusesAsTheToolkit(t *testing.T) {
	dir := toolkitTestdata(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.y*ml"))
	require.NoError(t, err)
	require.Greater(t, len(files), 30, "the toolkit's test data")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			sameVerdict(t, web.Validate(f), validate(f))
		})
	}
}

// inToolkitTerms is err's message with the Go types it names (a YAML error names the type it
// could not fill) renamed to the toolkit's: the only way the two messages may differ.
func inToolkitTerms(err error) string {
	return strings.NewReplacer(
		"webconfig.config", "web.Config",
		"webconfig.tlsServerConfig", "web.TLSConfig",
		"webconfig.httpServerConfig", "web.HTTPConfig",
		"webconfig.rateLimit", "web.RateLimiterConfig",
		"webconfig.cipher", "web.Cipher",
		"webconfig.curve", "web.Curve",
		"webconfig.version", "web.TLSVersion",
		"webconfig.secret", "config.Secret",
	).Replace(err.Error())
}

func TestCheckNamesTheFlagAndTheFix(t *testing.T) {
	err := Check(filepath.Join(t.TempDir(), "web.yml"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--web-config-file=")
	assert.Contains(t, err.Error(), "mount the web config")

	bad := filepath.Join(t.TempDir(), "web.yml")
	require.NoError(t, os.WriteFile(bad, []byte("tls_server_config:\n  cert_file: nowhere.crt\n  key_file: nowhere.key\n"), 0o600))
	err = Check(bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--web-config-file=")
	assert.Contains(t, err.Error(), "failed to read cert_file")
}

// FuzzParse: any file is accepted or refused as the toolkit does, but for the deliberate
// differences, and never panics.
func FuzzParse(f *testing.F) {
	dir := toolkitTestdata(f)
	files, _ := filepath.Glob(filepath.Join(dir, "*.y*ml"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "web.yml")
		require.NoError(t, os.WriteFile(p, b, 0o600))
		sameVerdict(t, web.Validate(p), validate(p))
	})
}

// answer is what a client sees: the error's kind, or the status, protocol and the headers the
// web config sets.
func answer(addr, scheme, certName, certDir, user, pass string) string {
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true, DisableKeepAlives: true} //nolint:gosec // the servers' certificates are the toolkit's test ones
	if certName != "" {
		cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, certName+".pem"), filepath.Join(certDir, certName+".key"))
		if err != nil {
			return "client certificate: " + err.Error()
		}
		tr.TLSClientConfig.Certificates = []tls.Certificate{cert}
	}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, scheme+"://"+addr+"/metrics", nil)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "error"
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	h := resp.Header
	return fmt.Sprintf("%d %s %q auth=%q frame=%q hsts=%q csp=%q", resp.StatusCode, resp.Proto, strings.TrimSpace(string(body)),
		h.Get("WWW-Authenticate"), h.Get("X-Frame-Options"), h.Get("Strict-Transport-Security"), h.Get("Content-Security-Policy"))
}

// Both servers, the toolkit's and ours, on the same files, answer every client alike: plain and
// TLS, with either of two client certificates or none, with the right password, a wrong one, an
// unknown user or none. Ours never panics; where the toolkit does, or where we refuse a file it
// serves, the test names the deliberate difference.
func TestServesAsTheToolkit(t *testing.T) {
	dir := certDir(t)
	hash, err := bcrypt.GenerateFromPassword([]byte("alice123"), bcrypt.MinCost)
	require.NoError(t, err)
	users := "basic_auth_users:\n  alice: " + string(hash) + "\n"
	tlsOn := "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
	configs := map[string]string{
		"empty":                            "",
		"users, no TLS":                    users,
		"TLS":                              tlsOn,
		"TLS and users":                    tlsOn + users,
		"TLS without HTTP/2":               tlsOn + "http_server_config:\n  http2: false\n",
		"client certificate verified":      tlsOn + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: client_selfsigned.pem\n",
		"any client certificate":           tlsOn + "  client_auth_type: RequireAnyClientCert\n",
		"client certificate if given":      tlsOn + "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: client_selfsigned.pem\n",
		"client certificate SANs":          tlsOn + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: client2_selfsigned.pem\n  client_allowed_sans: [one, test3, two]\n",
		"client certificate SAN wrong":     tlsOn + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: client2_selfsigned.pem\n  client_allowed_sans: [nobody]\n",
		"client certificate SANs if given": tlsOn + "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: client2_selfsigned.pem\n  client_allowed_sans: [one, test3, two]\n",
		"any client certificate SANs":      tlsOn + "  client_auth_type: RequireAnyClientCert\n  client_allowed_sans: [test3]\n",
		"headers":                          tlsOn + "http_server_config:\n  headers:\n    X-Frame-Options: deny\n    Strict-Transport-Security: max-age=31536000\n    Content-Security-Policy: \"default-src 'self'\"\n",
		"TLS 1.3 only":                     tlsOn + "  min_version: TLS13\n",
		"rate limit":                       "rate_limit:\n  interval: 1h\n  burst: 2\n",
	}
	for name, content := range configs {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.NewReplacer(" ", "_", "/", "_").Replace(name)+".yml")
			require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
			if Check(path) != nil {
				sameVerdict(t, web.Validate(path), validate(path))
				return // the toolkit's server with this file: toolkitTrustsUnverifiedSANs
			}
			theirs, theirLog := loggedServer(t, toolkitServe(path))
			ours, ourLog := loggedServer(t, Serve(path))
			defer func() {
				assert.NotContains(t, ourLog.String(), "panic")
				if strings.Contains(theirLog.String(), "panic") {
					deliberately(t, noPanicWithoutCertificate)
				}
			}()
			for _, scheme := range []string{"http", "https"} {
				for _, cert := range []string{"", "client_selfsigned", "client2_selfsigned"} {
					for _, login := range [][2]string{{}, {"alice", "alice123"}, {"alice", "alice1234"}, {"mallory", "alice123"}} {
						want := answer(theirs, scheme, cert, dir, login[0], login[1])
						got := answer(ours, scheme, cert, dir, login[0], login[1])
						assert.Equal(t, want, got, "%s, client certificate %q, login %q", scheme, cert, login[0])
					}
				}
			}
		})
	}
}
