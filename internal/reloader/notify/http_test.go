package notify

import (
	"bufio"
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var fastBackoff = Backoff{Duration: time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 5, Cap: 20 * time.Millisecond}

func TestHTTPNotify(t *testing.T) {
	tests := []struct {
		name       string
		answers    []int // status per request; the last one repeats
		success    string
		wantErr    string
		wantTries  int32
		wantMethod string
		method     string
	}{
		{name: "first try succeeds", answers: []int{200}, wantTries: 1, wantMethod: "POST"},
		{name: "any 2xx is success by default", answers: []int{204}, wantTries: 1, wantMethod: "POST"},
		{name: "fails then recovers", answers: []int{503, 500, 200}, wantTries: 3, wantMethod: "POST"},
		{name: "gives up after the bound with a hint", answers: []int{404}, wantTries: 5, wantErr: "failed after 5 tries: answered 404 Not Found (is the reload endpoint enabled", wantMethod: "POST"},
		{name: "method is configurable", method: "GET", answers: []int{200}, wantTries: 1, wantMethod: "GET"},
		{name: "success codes are configurable", success: "200,304", answers: []int{204, 304}, wantTries: 2, wantMethod: "POST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tries atomic.Int32
			var method, header atomic.Value
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := int(tries.Add(1))
				method.Store(r.Method)
				header.Store(r.Header.Get("X-Token"))
				code := tt.answers[min(n, len(tt.answers))-1]
				w.WriteHeader(code)
				_, _ = w.Write([]byte("password=hunter2")) // must never reach the error
			}))
			defer srv.Close()

			h := &HTTP{URL: srv.URL + "/-/reload", Method: tt.method, Header: http.Header{"X-Token": {"t"}}, Backoff: fastBackoff}
			if tt.success != "" {
				set, err := ParseCodeSet(tt.success)
				require.NoError(t, err)
				h.Success = set
			}
			err := h.Notify(context.Background())
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.NotContains(t, err.Error(), "hunter2")
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantTries, tries.Load())
			assert.Equal(t, tt.wantMethod, method.Load())
			assert.Equal(t, "t", header.Load())
		})
	}
}

func TestHTTPNotifyConnectionRefusedHint(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	err := (&HTTP{URL: url, Backoff: fastBackoff}).Notify(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is the app listening on that address")
}

// A URL may carry basic-auth credentials; the password never reaches an error (and so never a
// log line or an Event), for a failing status and for a refused connection.
func TestHTTPNotifyNeverShowsTheURLPassword(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(401) }))
	defer srv.Close()
	withPassword := strings.Replace(srv.URL, "http://", "http://admin:hunter2@", 1) + "/-/reload"
	err := (&HTTP{URL: withPassword, Backoff: fastBackoff}).Notify(context.Background())
	require.ErrorContains(t, err, "401")
	assert.Contains(t, err.Error(), "admin:xxxxx@")
	assert.NotContains(t, err.Error(), "hunter2")

	srv.Close()
	err = (&HTTP{URL: withPassword, Backoff: fastBackoff}).Notify(context.Background())
	require.ErrorContains(t, err, "is the app listening on that address")
	assert.NotContains(t, err.Error(), "hunter2")
}

func TestHTTPNotifyStopsWithContext(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	slow := Backoff{Duration: time.Second, Factor: 1, Steps: 100}
	start := time.Now()
	err := (&HTTP{URL: srv.URL, Backoff: slow}).Notify(ctx)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second, "Notify must return when ctx ends, not after its tries")
}

func TestParseCodeSet(t *testing.T) {
	tests := []struct {
		in      string
		in2xx   []int
		out     []int
		wantErr string
	}{
		{in: "200-299", in2xx: []int{200, 250, 299}, out: []int{199, 300}},
		{in: "200,304", in2xx: []int{200, 304}, out: []int{201, 303}},
		{in: " 202 , 204-206", in2xx: []int{202, 205}, out: []int{203, 207}},
		{in: "", wantErr: "is not an HTTP status code"},
		{in: "2xx", wantErr: `"2xx" is not an HTTP status code`},
		{in: "300-200", wantErr: "ends before it starts"},
		{in: "99", wantErr: "is not an HTTP status code"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			set, err := ParseCodeSet(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			for _, c := range tt.in2xx {
				assert.True(t, set.Contains(c), c)
			}
			for _, c := range tt.out {
				assert.False(t, set.Contains(c), c)
			}
			again, err := ParseCodeSet(set.String())
			require.NoError(t, err)
			assert.Equal(t, set, again)
		})
	}
}

func FuzzParseCodeSet(f *testing.F) {
	for _, s := range []string{"200-299", "200,304", "", "-", "1-2-3", "599"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseCodeSet(s)
		if err != nil {
			return
		}
		again, err := ParseCodeSet(set.String())
		require.NoError(t, err, "String() of an accepted set must parse: %q", set.String())
		assert.Equal(t, set, again)
	})
}

func TestHTTPNotifyHangingEndpointTimesOutPerTry(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // hang until the client gives up or the test ends
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	// The tries are counted where they are made: a try cut before its request reached the
	// server (a slow machine can take the 50 ms to connect) is a try all the same.
	var tries []error
	h := &HTTP{URL: srv.URL, Timeout: 50 * time.Millisecond, Backoff: Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3},
		OnTry: func(_ string, code int, err error) {
			assert.Zero(t, code, "no answer")
			tries = append(tries, err)
		}}
	err := h.Notify(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "failed after 3 tries")
	assert.Contains(t, err.Error(), "deadline exceeded")
	require.Len(t, tries, 3, "each hanging try is cut at the per-try timeout and tried again")
	for i, e := range tries {
		assert.ErrorIs(t, e, context.DeadlineExceeded, "try %d", i+1)
	}
}

// Credentials from files (a mounted Secret) are read on every request, so a rotated token is
// used at once; a missing file is an error that names the file, never a value.
func TestHTTPNotifyReadsCredentialFilesOnEveryRequest(t *testing.T) {
	var auth, key atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		key.Store(r.Header.Get("X-Api-Key"))
	}))
	defer srv.Close()
	dir := t.TempDir()
	tokenFile, keyFile := filepath.Join(dir, "token"), filepath.Join(dir, "key")
	require.NoError(t, os.WriteFile(tokenFile, []byte("tok-1\n"), 0o600))
	require.NoError(t, os.WriteFile(keyFile, []byte("key-1"), 0o600))
	h := &HTTP{URL: srv.URL, Backoff: fastBackoff, BearerTokenFile: tokenFile, HeaderFiles: map[string]string{"X-Api-Key": keyFile}}
	require.NoError(t, h.Notify(context.Background()))
	assert.Equal(t, "Bearer tok-1", auth.Load())
	assert.Equal(t, "key-1", key.Load())

	require.NoError(t, os.WriteFile(tokenFile, []byte("tok-2"), 0o600)) // the Secret was rotated
	require.NoError(t, h.Notify(context.Background()))
	assert.Equal(t, "Bearer tok-2", auth.Load())

	require.NoError(t, os.Remove(keyFile))
	err := h.Notify(context.Background())
	require.ErrorContains(t, err, keyFile)
	assert.NotContains(t, err.Error(), "tok-2")
}

// A redirect (to a login page, say) is not a reload: it is never followed, and it fails with
// a hint. The proxy from the environment is never used for the reload URL.
func TestHTTPNotifyNeverFollowsRedirectsOrUsesAProxy(t *testing.T) {
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	defer target.Close()
	redirect := httptest.NewServer(http.RedirectHandler(target.URL+"/login", http.StatusFound))
	defer redirect.Close()
	err := (&HTTP{URL: redirect.URL, Backoff: fastBackoff}).Notify(context.Background())
	require.ErrorContains(t, err, "302")
	assert.Contains(t, err.Error(), "never follows")
	assert.Zero(t, reached.Load(), "the redirect was followed")

	// Go never proxies loopback requests, whatever the environment says, so a request cannot
	// show it here: the client's transport must simply have no proxy function.
	tr, ok := NewClient().Transport.(*http.Transport)
	require.True(t, ok)
	assert.Nil(t, tr.Proxy, "the reload client must not take HTTP_PROXY from the environment")
}

// Query-string credentials are redacted like URL passwords, in every error.
func TestHTTPNotifyRedactsQueryValues(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }))
	u := srv.URL + "/-/reload?token=hunter22&x=1"
	err := (&HTTP{URL: u, Backoff: fastBackoff}).Notify(context.Background())
	require.ErrorContains(t, err, "500")
	assert.Contains(t, err.Error(), "token=xxxxx")
	assert.NotContains(t, err.Error(), "hunter22")
	srv.Close()
	err = (&HTTP{URL: u, Backoff: fastBackoff}).Notify(context.Background())
	require.ErrorContains(t, err, "is the app listening")
	assert.NotContains(t, err.Error(), "hunter22")
}

// k8s-sidecar's REQ_PAYLOAD and basic auth from files: the body is sent on every try, typed as
// JSON when it is JSON; a body file and the credential files are read on every request.
func TestHTTPNotifyBodyAndBasicAuthFiles(t *testing.T) {
	type seen struct{ body, contentType, user, password string }
	got := make(chan seen, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		user, password, _ := r.BasicAuth()
		got <- seen{string(b), r.Header.Get("Content-Type"), user, password}
	}))
	defer srv.Close()
	dir := t.TempDir()
	userFile, passFile, bodyFile := filepath.Join(dir, "user"), filepath.Join(dir, "pass"), filepath.Join(dir, "body")
	require.NoError(t, os.WriteFile(userFile, []byte("admin\n"), 0o600))
	require.NoError(t, os.WriteFile(passFile, []byte("pw-1\n"), 0o600))
	require.NoError(t, os.WriteFile(bodyFile, []byte("reload please"), 0o600))

	h := &HTTP{URL: srv.URL, Backoff: fastBackoff, Body: []byte(`{"dashboards": true}`), UsernameFile: userFile, PasswordFile: passFile}
	require.NoError(t, h.Notify(context.Background()))
	assert.Equal(t, seen{`{"dashboards": true}`, "application/json", "admin", "pw-1"}, <-got)

	require.NoError(t, os.WriteFile(passFile, []byte("pw-2"), 0o600)) // rotated
	h = &HTTP{URL: srv.URL, Backoff: fastBackoff, BodyFile: bodyFile, UsernameFile: userFile, PasswordFile: passFile}
	require.NoError(t, h.Notify(context.Background()))
	assert.Equal(t, seen{"reload please", "text/plain; charset=utf-8", "admin", "pw-2"}, <-got)

	h = &HTTP{URL: srv.URL, Backoff: fastBackoff, Body: []byte("a=1"), Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}}
	require.NoError(t, h.Notify(context.Background()))
	assert.Equal(t, seen{"a=1", "application/x-www-form-urlencoded", "", ""}, <-got, "a Content-Type given wins")

	fails := 0
	retried := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{body: string(b)}
		if fails++; fails < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer retried.Close()
	require.NoError(t, (&HTTP{URL: retried.URL, Backoff: fastBackoff, Body: []byte("x")}).Notify(context.Background()))
	for range 3 {
		assert.Equal(t, "x", (<-got).body, "every try carries the whole body")
	}

	require.NoError(t, os.Remove(passFile))
	err := (&HTTP{URL: srv.URL, Backoff: fastBackoff, UsernameFile: userFile, PasswordFile: passFile}).Notify(context.Background())
	require.ErrorContains(t, err, "--reload-http-password-file")
	assert.NotContains(t, err.Error(), "admin")
}

// k8s-sidecar's credentials, mixed: the user from a file read on every request, the password
// from the URL; basic auth only with both parts, as k8s-sidecar.
func TestBasicAuthPartsFromFileAndURL(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = append(got, r.Header.Get("Authorization")) }))
	defer srv.Close()
	user := filepath.Join(t.TempDir(), "user")
	require.NoError(t, os.WriteFile(user, []byte("admin\n"), 0o600))
	withPassword := strings.Replace(srv.URL, "http://", "http://:s3cr3t@", 1)
	for _, h := range []*HTTP{
		{URL: withPassword, UsernameFile: user},
		{URL: srv.URL, UsernameFile: user}, // no password anywhere: no auth
	} {
		h.Method = "POST"
		var err error
		h.Success, err = ParseCodeSet("200-299")
		require.NoError(t, err)
		h.Backoff = DefaultBackoff
		h.Backoff.Steps = 1
		require.NoError(t, h.Notify(context.Background()))
	}
	require.Len(t, got, 2)
	assert.Equal(t, "Basic "+base64.StdEncoding.EncodeToString([]byte("admin:s3cr3t")), got[0])
	assert.Empty(t, got[1])
}

// One connection to the app is kept between reloads, as configmap-reload keeps it; a request
// on it that the app closed without answering is sent again at once on a new connection,
// within the same try, and a request the app answered is never sent twice.
func TestHTTPNotifyKeepsItsConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var mu sync.Mutex
	conns, requests := 0, 0
	// The app answers every request on a connection with keep-alive, except that it closes the
	// connection unanswered when the third request comes: as an app that timed the idle
	// connection out just as the reload arrived.
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns++
			mu.Unlock()
			go func(c net.Conn) {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(r)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					mu.Lock()
					requests++
					n := requests
					mu.Unlock()
					if n == 3 {
						return
					}
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				}
			}(c)
		}
	}()
	tries := 0
	h := &HTTP{URL: "http://" + ln.Addr().String() + "/-/reload", Client: NewClient(), OnTry: func(string, int, error) { tries++ }}
	for i := range 3 {
		require.NoError(t, h.Notify(context.Background()), "reload %d", i+1)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 3, tries, "each reload one try: the unanswered request was resent within it")
	assert.Equal(t, 4, requests, "three reloads and the one resent")
	assert.Equal(t, 2, conns, "one connection kept for the first two reloads, a new one after the app closed it")
}
