package notify

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type notifyFunc func(context.Context) error

func (f notifyFunc) Notify(ctx context.Context) error { return f(ctx) }

func TestRuntimeInfoConfirmed(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		after   func(success bool, last time.Time) (bool, time.Time) // what the app reports after the signal
		timeout time.Duration                                        // long where the app reports a reload, so that a slow machine still sees it; short where none comes
		wantErr string
	}{
		{"a newer successful reload confirms it", func(bool, time.Time) (bool, time.Time) { return true, t0.Add(time.Second) }, time.Minute, ""},
		{"a failed reload is an error", func(bool, time.Time) (bool, time.Time) { return false, t0 }, time.Minute, "could not load the new config"},
		{"no newer reload within the time limit is an error", func(s bool, l time.Time) (bool, time.Time) { return s, l }, 200 * time.Millisecond, "no successful reload reported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			success, last := true, t0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				fmt.Fprintf(w, `{"status":"success","data":{"reloadConfigSuccess":%v,"lastConfigTime":%q}}`, success, last.Format(time.RFC3339Nano))
			}))
			defer srv.Close()
			signalled := false
			c := &RuntimeInfoConfirmed{URL: srv.URL + "/api/v1/status/runtimeinfo", Poll: 5 * time.Millisecond, Timeout: tt.timeout,
				Notifier: notifyFunc(func(context.Context) error {
					mu.Lock()
					defer mu.Unlock()
					signalled = true
					success, last = tt.after(success, last)
					return nil
				})}
			err := c.Notify(context.Background())
			assert.True(t, signalled)
			if tt.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tt.wantErr)
			}
		})
	}
}

func TestRuntimeInfoConfirmedNeedsTheRuntimeInfo(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	err := (&RuntimeInfoConfirmed{URL: srv.URL + "/x?token=s3cr3t", Notifier: notifyFunc(func(context.Context) error { t.Fatal("signalled"); return nil })}).Notify(context.Background())
	require.ErrorContains(t, err, "answered 404")
	assert.NotContains(t, err.Error(), "s3cr3t")
}

// A wedged app (it accepts and never answers) holds the check no longer than the request's
// bound: the loop goes on, and --unhealthy-after can fire.
func TestRuntimeInfoConfirmedIsBounded(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	done := make(chan error, 1)
	go func() {
		done <- (&RuntimeInfoConfirmed{URL: srv.URL + "/api/v1/status/runtimeinfo", RequestTimeout: 200 * time.Millisecond,
			Notifier: notifyFunc(func(context.Context) error { return nil })}).Notify(context.Background())
	}()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "before the reload")
	case <-time.After(time.Minute): // unbounded, it would wait as long as the app does: forever
		t.Fatal("the runtime-info check never returned from a wedged app")
	}
}

// A URL that does not parse is never repeated: it may hold a password.
func TestRuntimeInfoConfirmedHidesAMalformedURL(t *testing.T) {
	err := (&RuntimeInfoConfirmed{URL: "http://admin:s3cr3t@[::1/x", Notifier: notifyFunc(func(context.Context) error { return nil })}).Notify(context.Background())
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cr3t")
}
