package onefirst

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestReadyVerdict(t *testing.T) {
	soak, poll := 30*time.Second, time.Second
	for _, tc := range []struct {
		name            string
		wasReady, ready bool
		soaked          time.Duration
		fails           bool
	}{
		{"Ready: healthy", true, true, 5 * time.Second, false},
		{"was Ready, not now: failed", true, false, 5 * time.Second, true},
		{"never Ready yet, early in the soak: wait and see", false, false, 5 * time.Second, false},
		{"never Ready, the soak about to end: failed", false, false, 29 * time.Second, true},
		{"not Ready before, Ready now (a fix): healthy", false, true, 29 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readyVerdict(tc.wasReady, tc.ready, tc.soaked, soak, poll)
			assert.Equal(t, tc.fails, got != "", got)
		})
	}
}

func TestHealthFailed(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	ready, code, reload := true, http.StatusOK, ""
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }))
	defer app.Close()
	h := &Health{Pod: func(context.Context) (PodState, error) { return PodState{Ready: ready}, nil }, ReloadFailed: func(time.Time) string { return reload },
		URL: app.URL, Soak: 10 * time.Second, Poll: time.Second, Clock: func() time.Time { return now }}
	ctx := context.Background()
	since := now
	assert.Empty(t, h.Failed(ctx, since, &PodState{Ready: ready}))
	ready = false
	assert.Contains(t, h.Failed(ctx, since, &PodState{Ready: ready}), "became not Ready")
	ready, code = true, http.StatusServiceUnavailable
	assert.Equal(t, "--health-url answered 503", h.Failed(ctx, since, &PodState{Ready: ready}))
	code, reload = http.StatusOK, "the app refused the reload request"
	assert.Equal(t, "the app refused the reload request", h.Failed(ctx, since, &PodState{Ready: ready}))
	reload = ""
	ready = false
	since = now.Add(time.Second) // a new content: what was seen of the last does not count
	assert.Empty(t, h.Failed(ctx, since, &PodState{Ready: ready}), "not Ready before and since: early in the soak, no verdict")

	// Ready as the content is laid out, not Ready at the first look after: failed at once.
	ready = true
	since = now.Add(2 * time.Second)
	h.Begin(ctx, since)
	ready = false
	assert.Contains(t, h.Failed(ctx, since, &PodState{Ready: ready}), "became not Ready")
}

// A redirect from the health URL is an answer of its own (a 302 to a login page is no health),
// not followed.
func TestHealthURLRedirectIsNotFollowed(t *testing.T) {
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/login", http.StatusFound) }))
	defer moved.Close()
	h := &Health{URL: moved.URL + "/healthz", Poll: time.Second}
	assert.Equal(t, "--health-url answered 302", h.checkURL(context.Background()))
}

// --health-url-failure-threshold: a soak fails on the Nth failed request in a row, and a 2xx
// in between starts the count again; --health-url-timeout: a slower answer is a failure.
func TestHealthURLFailureThresholdAndTimeout(t *testing.T) {
	code, hang := http.StatusServiceUnavailable, false
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang {
			<-r.Context().Done() // answers only once the client gave up
			return
		}
		w.WriteHeader(code)
	}))
	defer app.Close()
	// A timeout no slow machine reaches where the app answers: only the hanging request may
	// run into it.
	h := &Health{Pod: func(context.Context) (PodState, error) { return PodState{Ready: true}, nil }, ReloadFailed: func(time.Time) string { return "" },
		URL: app.URL, URLFailures: 3, URLTimeout: 10 * time.Second, Soak: 10 * time.Second, Poll: time.Second, Clock: time.Now}
	ctx, since, ready := context.Background(), time.Now(), &PodState{Ready: true}
	assert.Empty(t, h.Failed(ctx, since, ready), "1 of 3")
	assert.Empty(t, h.Failed(ctx, since, ready), "2 of 3")
	code = http.StatusOK
	assert.Empty(t, h.Failed(ctx, since, ready), "a 2xx starts the count again")
	code = http.StatusServiceUnavailable
	assert.Empty(t, h.Failed(ctx, since, ready))
	assert.Empty(t, h.Failed(ctx, since, ready))
	assert.Equal(t, "--health-url answered 503", h.Failed(ctx, since, ready), "3 in a row")
	// A new content starts the count again: two failures of the last do not count.
	next := since.Add(time.Minute)
	assert.Empty(t, h.Failed(ctx, next, ready), "1 of 3 for the new content")
	code, hang = http.StatusOK, true
	h.URLFailures, h.URLTimeout = 1, 50*time.Millisecond
	assert.Equal(t, "--health-url did not answer", h.Failed(ctx, next, ready), "slower than --health-url-timeout")
	// A step that ran out of time (the API was slow) takes no sample.
	done, cancel := context.WithCancel(ctx)
	cancel()
	assert.Empty(t, h.Failed(done, next, ready), "no sample: the API's delay is not the app's")
}

func TestRedactURL(t *testing.T) {
	assert.Equal(t, "http://127.0.0.1:8080/healthz", redactURL("http://user:pass@127.0.0.1:8080/healthz?token=s3cret#x"))
	assert.Equal(t, "(unparsable)", redactURL("http://[::1"))
}
