package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/configwave/configwave/internal/process/credfile"
	"k8s.io/klog/v2"
)

// DefaultBackoff spaces the tries of a reload request: 0.2 s doubling up to 10 s, each wait
// up to 20 % longer, eight tries (about 25 s) before giving up.
var DefaultBackoff = Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 8, Cap: 10 * time.Second}

// HTTP sends one request per reload, retrying until the app answers with a success code.
type HTTP struct {
	URL    string
	Method string      // default POST
	Header http.Header // extra request headers
	// HeaderFiles are headers whose value is read from a file on every request (name → path),
	// so that a credential can come from a mounted Secret and be rotated without a restart.
	HeaderFiles map[string]string
	// BearerTokenFile, when set, is read on every request and sent as "Authorization: Bearer".
	BearerTokenFile string
	// UsernameFile and PasswordFile, when set, are read on every request and sent as basic
	// auth (k8s-sidecar's --req-username-file, --req-password-file); a part without a file
	// comes from the URL's user:password@, as k8s-sidecar mixes REQ_USERNAME_FILE with
	// REQ_PASSWORD. As k8s-sidecar, basic auth goes only with both a user and a password.
	UsernameFile, PasswordFile string
	// Body, or the file BodyFile read on every request, is the request's body (k8s-sidecar's
	// REQ_PAYLOAD). Without a Content-Type header it is sent as application/json when it is
	// JSON, as text/plain otherwise.
	Body     []byte
	BodyFile string
	Timeout  time.Duration // per try; default 10 s
	Success  CodeSet       // default 2xx
	Backoff  Backoff       // default DefaultBackoff
	Client   *http.Client  // default NewClient(), or one with TLS
	// TLS, when set, is used for an https URL (and ignored with Client set).
	TLS *TLSFiles
	// OnTry and OnDone, when set, see each try and the end of each Notify, for metrics such as
	// configmap-reload's. url is the URL as shown (password and query values hidden); code is
	// 0 when no answer came.
	OnTry  func(url string, code int, err error)
	OnDone func(url string, err error, took time.Duration)
}

// KeepIdle is how long the connection to the app is kept between reloads: shorter than the
// idle timeouts apps set (nginx 75 s, Go's servers often 60 s or more), so the app seldom
// closes it first.
const KeepIdle = 30 * time.Second

// NewClient is the reload client: no redirects followed (a 302 to a login page is not a
// reload), no proxy from the environment (HTTP_PROXY is for the app's traffic out of the pod,
// not for a request to 127.0.0.1 that may carry a token), and one connection to the app kept
// between reloads for KeepIdle, as configmap-reload keeps it: a reload then costs no dial.
// The rest is the standard library's default transport: its dial and TLS handshake timeouts.
func NewClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy, t.ForceAttemptHTTP2 = nil, false
	t.MaxIdleConns, t.MaxIdleConnsPerHost, t.IdleConnTimeout = 4, 1, KeepIdle
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

var defaultClient = NewClient()

// Notify sends the request until it succeeds, the tries run out, or ctx ends.
func (h *HTTP) Notify(ctx context.Context) error {
	method := h.Method
	if method == "" {
		method = http.MethodPost
	}
	backoff := h.Backoff
	if backoff.Steps == 0 {
		backoff = DefaultBackoff
	}
	begun := time.Now()
	err := h.tries(ctx, method, backoff)
	if h.OnDone != nil {
		h.OnDone(h.shownURL(), err, time.Since(begun))
	}
	return err
}

// tries sends the request until it succeeds, the backoff's tries run out, or ctx ends.
func (h *HTTP) tries(ctx context.Context, method string, backoff Backoff) error {
	var last error
	tries := 0
	ok, err := backoff.retry(ctx, func() bool {
		tries++
		last = h.try(ctx, method)
		if last != nil {
			klog.V(2).InfoS("reload request failed, will retry", "method", method, "url", h.shownURL(), "try", tries, "err", last)
		}
		return last == nil
	})
	switch {
	case ok:
		return nil
	case last != nil:
		return fmt.Errorf("reload request %s %s failed after %d tries: %w%s", method, h.shownURL(), tries, last, hint(last))
	default:
		return fmt.Errorf("reload request %s %s: %w", method, h.shownURL(), err)
	}
}

// shownURL is the URL for logs, Events and errors, with any password and every query value
// replaced by "xxxxx": a query string is where reload endpoints often take a token.
func (h *HTTP) shownURL() string { return RedactURL(h.URL) }

// RedactURL hides a URL's password and query values.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(the --reload-http URL)"
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"xxxxx"}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

func (h *HTTP) try(ctx context.Context, method string) (err error) {
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body := h.Body
	if h.BodyFile != "" {
		if body, err = os.ReadFile(h.BodyFile); err != nil {
			return fmt.Errorf("--reload-http-body: read %s: %w (is it mounted there?)", h.BodyFile, errors.Unwrap(err))
		}
	}
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.URL, reader)
	if err != nil {
		return err
	}
	// The kept connection may have been closed by the app meanwhile. Marked replayable (a nil
	// Idempotency-Key is never sent), the request is sent again on a new connection by net/http
	// when the failure came before any byte of an answer, and only then: nothing was sent, or
	// the app closed the connection without answering. A request the app answered is never
	// repeated here.
	req.Header["Idempotency-Key"] = nil

	for k, vs := range h.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	for name, file := range h.HeaderFiles {
		v, err := readCredential(file)
		if err != nil {
			return fmt.Errorf("--reload-http-header %s: %w", name, err)
		}
		req.Header.Set(name, v)
	}
	if h.BearerTokenFile != "" {
		token, err := readCredential(h.BearerTokenFile)
		if err != nil {
			return fmt.Errorf("--reload-http-bearer-token-file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if h.UsernameFile != "" || h.PasswordFile != "" {
		user, password := "", ""
		if u := req.URL.User; u != nil {
			user = u.Username()
			password, _ = u.Password()
		}
		req.URL.User = nil // Go would send the URL's part alone
		if h.UsernameFile != "" {
			if user, err = readCredential(h.UsernameFile); err != nil {
				return fmt.Errorf("--reload-http-username-file: %w", err)
			}
		}
		if h.PasswordFile != "" {
			if password, err = readCredential(h.PasswordFile); err != nil {
				return fmt.Errorf("--reload-http-password-file: %w", err)
			}
		}
		if user != "" && password != "" {
			req.SetBasicAuth(user, password)
		}
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "text/plain; charset=utf-8")
		if json.Valid(body) {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	client, err := h.TLS.clientFor(h.Client, req)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		err = redactURLError(err, h.URL)
		if h.OnTry != nil {
			h.OnTry(h.shownURL(), 0, err)
		}
		return err
	}
	defer resp.Body.Close()
	if h.OnTry != nil {
		defer func() { h.OnTry(h.shownURL(), resp.StatusCode, err) }()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if !h.Success.Contains(resp.StatusCode) {
		return &StatusError{Code: resp.StatusCode, Status: resp.Status}
	}
	return nil
}

// redactURLError hides the URL net/http repeats in its errors, query string included.
func redactURLError(err error, raw string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = RedactURL(raw)
	}
	return err
}

// maxCredential bounds a token or header value read from a file: a JWT is a few KiB.
const maxCredential = 64 << 10

// readCredential reads a token or header value from a file: one line, trimmed. The value is
// never part of an error.
func readCredential(path string) (string, error) {
	return credfile.Line(path, maxCredential, "a header value")
}

// StatusError is an answer whose status code is not a success. The body is never included:
// an app may echo its config, and config may hold secrets.
type StatusError struct {
	Code   int
	Status string
}

func (e *StatusError) Error() string { return "answered " + e.Status }

// hint names the usual cause of a failure users hit when setting up a reload endpoint.
func hint(err error) string {
	var se *StatusError
	if errors.As(err, &se) {
		if se.Code >= 300 && se.Code < 400 {
			return " (a redirect, which the reloader never follows: point --reload-http at the reload endpoint itself)"
		}
		switch se.Code {
		case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusForbidden:
			return " (is the reload endpoint enabled and is --reload-http-method right? Prometheus needs --web.enable-lifecycle)"
		}
		return ""
	}
	if strings.Contains(err.Error(), "connection refused") {
		return " (is the app listening on that address, in the same pod?)"
	}
	return tlsHint(err)
}

// CodeSet is a set of HTTP status codes; the zero value means 200–299.
type CodeSet struct{ ranges [][2]int }

// Contains reports whether code is in the set.
func (s CodeSet) Contains(code int) bool {
	if len(s.ranges) == 0 {
		return code >= 200 && code <= 299
	}
	for _, r := range s.ranges {
		if code >= r[0] && code <= r[1] {
			return true
		}
	}
	return false
}

// String formats the set as ParseCodeSet accepts it.
func (s CodeSet) String() string {
	if len(s.ranges) == 0 {
		return "200-299"
	}
	parts := make([]string, 0, len(s.ranges))
	for _, r := range s.ranges {
		if r[0] == r[1] {
			parts = append(parts, strconv.Itoa(r[0]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r[0], r[1]))
		}
	}
	return strings.Join(parts, ",")
}

// ParseCodeSet parses a comma-separated list of codes and ranges, e.g. "200-299,304".
func ParseCodeSet(s string) (CodeSet, error) {
	var set CodeSet
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parseCode(lo)
		if err != nil {
			return CodeSet{}, fmt.Errorf("status code list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = parseCode(hi); err != nil {
				return CodeSet{}, fmt.Errorf("status code list %q: %w", s, err)
			}
			if b < a {
				return CodeSet{}, fmt.Errorf("status code list %q: range %q ends before it starts", s, part)
			}
		}
		set.ranges = append(set.ranges, [2]int{a, b})
	}
	return set, nil
}

func parseCode(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 100 || n > 599 {
		return 0, fmt.Errorf("%q is not an HTTP status code (100-599)", s)
	}
	return n, nil
}
