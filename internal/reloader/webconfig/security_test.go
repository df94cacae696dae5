package webconfig

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

// certDir is a folder with the toolkit's server and client certificates, for the files the tests
// write beside them.
func certDir(t *testing.T) string {
	t.Helper()
	td := toolkitTestdata(t)
	dir := t.TempDir()
	for _, f := range []string{"server.crt", "server.key", "client_selfsigned.pem", "client_selfsigned.key", "client2_selfsigned.pem", "client2_selfsigned.key"} {
		b, err := os.ReadFile(filepath.Join(td, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o600))
	}
	return dir
}

// syncBuffer is a server's error log, written by its connections' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// loggedServer serves "ok" with serve, its error log (where net/http reports a handler's panic
// and a failed handshake) kept for the test.
func loggedServer(t *testing.T, serve func(net.Listener, *http.Server) error) (addr string, errorLog *syncBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	errorLog = &syncBuffer{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(errorLog, "", 0)}
	done := make(chan struct{})
	go func() { _ = serve(ln, srv); close(done) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return ln.Addr().String(), errorLog
}

// waitForLog waits until the server has logged what it makes of the last connection: the log is
// written after the client has seen the connection fail.
func waitForLog(t *testing.T, errorLog *syncBuffer, substr string) {
	t.Helper()
	assert.Eventually(t, func() bool { return strings.Contains(errorLog.String(), substr) }, 10*time.Second, 10*time.Millisecond,
		"the server's error log: %s", errorLog)
}

func writeConfig(t *testing.T, dir, content string) string {
	t.Helper()
	path := filepath.Join(dir, "web.yml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

const serverTLS = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"

// With client_allowed_sans, a client that sends no certificate is refused by a TLS error, never by
// a panic in the handshake (which net/http recovers and logs with a stack trace: a log flood for
// anyone who connects), whatever the client auth type.
func TestClientAllowedSANsAndNoClientCertificate(t *testing.T) {
	for _, tc := range []struct {
		name, tls string
	}{
		{"NoClientCert", ""},
		{"RequestClientCert", "  client_auth_type: RequestClientCert\n"},
		{"RequireAnyClientCert", "  client_auth_type: RequireAnyClientCert\n"},
		{"VerifyClientCertIfGiven", "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: client2_selfsigned.pem\n"},
		{"RequireAndVerifyClientCert", "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: client2_selfsigned.pem\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := certDir(t)
			path := writeConfig(t, dir, serverTLS+tc.tls+"  client_allowed_sans: [test3]\n")
			if err := Check(path); err != nil {
				// Refused at start: TestClientAllowedSANsNeedAVerifiedCertificate says why.
				assert.Contains(t, err.Error(), "client_allowed_sans")
				return
			}
			addr, errorLog := loggedServer(t, Serve(path))
			assert.Equal(t, "error", answer(addr, "https", "", dir, "", ""), "no client certificate")
			waitForLog(t, errorLog, "TLS handshake error")
			assert.NotContains(t, errorLog.String(), "panic")
			assert.Contains(t, answer(addr, "https", "client2_selfsigned", dir, "", ""), "200 ", "a client certificate with an allowed SAN")
		})
	}
}

// client_allowed_sans is only ever checked against a certificate that verified against the client
// CA: a client auth type that verifies nothing, or none at all, is refused at start with what
// to do instead.
func TestClientAllowedSANsNeedAVerifiedCertificate(t *testing.T) {
	for _, tc := range []struct {
		name, content string
	}{
		{"RequestClientCert", serverTLS + "  client_auth_type: RequestClientCert\n  client_allowed_sans: [test3]\n"},
		{"RequireAnyClientCert", serverTLS + "  client_auth_type: RequireAnyClientCert\n  client_allowed_sans: [test3]\n"},
		{"RequireClientCert, the old name", serverTLS + "  client_auth_type: RequireClientCert\n  client_allowed_sans: [test3]\n"},
		{"RequireAnyClientCert with a client CA", serverTLS + "  client_auth_type: RequireAnyClientCert\n  client_ca_file: client2_selfsigned.pem\n  client_allowed_sans: [test3]\n"},
		{"no client auth type", serverTLS + "  client_allowed_sans: [test3]\n"},
		{"NoClientCert", serverTLS + "  client_auth_type: NoClientCert\n  client_allowed_sans: [test3]\n"},
		{"no TLS at all", "tls_server_config:\n  client_allowed_sans: [test3]\n"},
		{"RequireAndVerifyClientCert without a client CA", serverTLS + "  client_auth_type: RequireAndVerifyClientCert\n  client_allowed_sans: [test3]\n"},
		{"VerifyClientCertIfGiven without a client CA", serverTLS + "  client_auth_type: VerifyClientCertIfGiven\n  client_allowed_sans: [test3]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, certDir(t), tc.content)
			err := Check(path)
			require.Error(t, err)
			for _, want := range []string{path, "client_auth_type", "client_allowed_sans", "RequireAndVerifyClientCert", "client_ca_file"} {
				assert.Contains(t, err.Error(), want)
			}
			// A server closed before it starts: Serve returns at once, with the error of the file or,
			// when it would have served, http.ErrServerClosed.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer ln.Close()
			srv := &http.Server{ReadHeaderTimeout: time.Second}
			require.NoError(t, srv.Close())
			err = Serve(path)(ln, srv)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "client_allowed_sans", "Serve refuses the file too")
		})
	}
}

// A client certificate whose SAN is taken off client_allowed_sans no longer gets in, also by
// resuming a TLS session it made before: crypto/tls does not call VerifyPeerCertificate on a
// resumed session, so a check made there would keep a removed client in for the ticket's life.
func TestRemovedSANEndsResumedSessions(t *testing.T) {
	resp, err := afterSANRemoved(t, Serve)
	if err == nil {
		t.Errorf("the removed SAN got in (status %d, session resumed: %v)", resp.StatusCode, resp.TLS.DidResume)
	}
}

// afterSANRemoved serves, with serve (ours or the toolkit's), a file that lets client2's SAN in;
// client2 connects twice (the second resuming the first's session), the file is changed to let
// no one in, and client2 connects once more: its answer.
func afterSANRemoved(t *testing.T, serve func(path string) func(net.Listener, *http.Server) error) (*http.Response, error) {
	t.Helper()
	dir := certDir(t)
	verified := serverTLS + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: client2_selfsigned.pem\n"
	path := writeConfig(t, dir, verified+"  client_allowed_sans: [test3]\n")
	addr, _ := loggedServer(t, serve(path))
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "client2_selfsigned.pem"), filepath.Join(dir, "client2_selfsigned.key"))
	require.NoError(t, err)
	tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // the server's certificate is the toolkit's test one
		Certificates:       []tls.Certificate{cert}, ClientSessionCache: tls.NewLRUClientSessionCache(4)}}
	t.Cleanup(tr.CloseIdleConnections)
	get := func() (*http.Response, error) {
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + addr + "/")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		return resp, err
	}
	_, err = get()
	require.NoError(t, err)
	resp, err := get()
	require.NoError(t, err)
	require.True(t, resp.TLS.DidResume, "the second connection resumes the first one's session")

	writeConfig(t, dir, verified+"  client_allowed_sans: [nobody]\n")
	return get()
}

// usersFile is a web config with users whose hashes have these costs; the hashes are made at the
// lowest cost and their cost rewritten, since a cost-12 hash takes long to make and only its cost
// matters here.
func usersFile(t *testing.T, costs ...int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("basic_auth_users:\n")
	for i, cost := range costs {
		hash, err := bcrypt.GenerateFromPassword([]byte(fmt.Sprint("password", i)), bcrypt.MinCost)
		require.NoError(t, err)
		fmt.Fprintf(&b, "  user%d: %s\n", i, strings.Replace(string(hash), "$04$", fmt.Sprintf("$%02d$", cost), 1))
	}
	return writeConfig(t, t.TempDir(), b.String())
}

// The hash compared for a user the file does not list has the cost of the listed users' hashes
// (the highest, when they differ), so that the time of a refusal does not tell whether the user
// exists.
func TestUnknownUserHashHasTheUsersCost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		costs []int
		want  int
	}{
		{"cost 4", []int{4}, 4},
		{"cost 12", []int{12}, 12},
		{"costs 4 and 12", []int{4, 12, 4}, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHandler(usersFile(t, tc.costs...), http.NotFoundHandler())
			var compared []byte
			h.compare = func(hash, _ []byte) error {
				compared = hash
				return bcrypt.ErrMismatchedHashAndPassword
			}
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.SetBasicAuth("mallory", "password0")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assert.Equal(t, http.StatusUnauthorized, rec.Code)
			require.NotNil(t, compared, "a hash is compared for the unknown user")
			cost, err := bcrypt.Cost(compared)
			require.NoError(t, err)
			assert.Equal(t, tc.want, cost)
			if cost == bcrypt.MinCost {
				// A hash that works, whose comparison does the whole work and matches nothing.
				assert.ErrorIs(t, bcrypt.CompareHashAndPassword(compared, []byte("fakepassword")), bcrypt.ErrMismatchedHashAndPassword)
			}
		})
	}
}

// Many distinct bad logins leave a good login remembered: a scrape with the right password is
// answered without a bcrypt comparison (which runs one at a time) however many wrong ones come.
func TestBadLoginsDoNotEvictAGoodLogin(t *testing.T) {
	h := newHandler(usersFile(t, bcrypt.MinCost), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	real, comparisons := h.compare, 0
	h.compare = func(hash, password []byte) error {
		comparisons++
		if string(password) == "password0" {
			return real(hash, password)
		}
		return bcrypt.ErrMismatchedHashAndPassword // the real comparison refuses it too, slower
	}
	login := func(user, pass string) int {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.SetBasicAuth(user, pass)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	require.Equal(t, http.StatusOK, login("user0", "password0"))
	require.Equal(t, 1, comparisons)
	// Random eviction would keep the good login through 200 bad ones about a third of the time;
	// 1000 make the loss certain where bad logins can evict good ones.
	for i := range 1000 {
		user := "user0"
		if i%2 == 1 {
			user = fmt.Sprint("nobody", i)
		}
		require.Equal(t, http.StatusUnauthorized, login(user, fmt.Sprint("wrong", i)))
	}
	require.Equal(t, 1001, comparisons)
	assert.Equal(t, http.StatusOK, login("user0", "password0"))
	assert.Equal(t, 1001, comparisons, "the good login is answered from the cache")
}

// verifySANs reads the SANs of a verified chain only: a certificate the client sent but that
// crypto/tls did not verify (PeerCertificates without VerifiedChains) is refused whatever it names.
func TestVerifySANsReadsVerifiedChainsOnly(t *testing.T) {
	td := toolkitTestdata(t)
	pair, err := tls.LoadX509KeyPair(filepath.Join(td, "client2_selfsigned.pem"), filepath.Join(td, "client2_selfsigned.key"))
	require.NoError(t, err)
	client2 := pair.Leaf // names test3
	require.NotNil(t, client2)
	for _, tc := range []struct {
		name    string
		allowed []string
		cs      tls.ConnectionState
		wantErr string
	}{
		{"no certificate", []string{"test3"}, tls.ConnectionState{}, "no certificate verified"},
		{"a certificate not verified", []string{"test3"}, tls.ConnectionState{PeerCertificates: []*x509.Certificate{client2}}, "no certificate verified"},
		{"a verified certificate with an allowed SAN", []string{"one", "test3"}, tls.ConnectionState{PeerCertificates: []*x509.Certificate{client2}, VerifiedChains: [][]*x509.Certificate{{client2}}}, ""},
		{"a verified certificate without one", []string{"one"}, tls.ConnectionState{PeerCertificates: []*x509.Certificate{client2}, VerifiedChains: [][]*x509.Certificate{{client2}}}, "names none of client_allowed_sans"},
		{"an empty list lets no one in", []string{}, tls.ConnectionState{PeerCertificates: []*x509.Certificate{client2}, VerifiedChains: [][]*x509.Certificate{{client2}}}, "names none of client_allowed_sans"},
		{"an empty chain", []string{"test3"}, tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{}}}, "no certificate verified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &tlsServerConfig{ClientAllowedSANs: tc.allowed}
			var err error
			require.NotPanics(t, func() { err = c.verifySANs(tc.cs) })
			if tc.wantErr == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tc.wantErr)
			}
		})
	}
}

// The login caches hold neither password nor user in clear: only keyed digests.
func TestLoginCachesHoldNoPassword(t *testing.T) {
	h := newHandler("", http.NotFoundHandler())
	assert.True(t, h.allowed(map[string]secret{"user0": secret(mustHash(t, "password0"))}, "user0", "password0"))
	assert.False(t, h.allowed(map[string]secret{"user0": secret(mustHash(t, "password0"))}, "user0", "wrong"))
	require.Len(t, h.accepted.m, 1)
	require.Len(t, h.refused.m, 1)
	for _, c := range []*authCache{h.accepted, h.refused} {
		for k := range c.m {
			for _, clear := range []string{"password0", "wrong", "user0"} {
				assert.NotContains(t, string(k[:]), clear)
				assert.NotContains(t, fmt.Sprintf("%x", k), fmt.Sprintf("%x", clear))
			}
		}
	}
}

func mustHash(t *testing.T, password string) []byte {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	require.NoError(t, err)
	return hash
}
