package alert

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type recorder struct {
	mu     sync.Mutex
	texts  []string
	codes  []int // answers to give, in order; then 200
	posts  int
	ctypes []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.posts++
	r.ctypes = append(r.ctypes, req.Header.Get("Content-Type"))
	if len(r.codes) > 0 {
		code := r.codes[0]
		r.codes = r.codes[1:]
		w.WriteHeader(code)
		return
	}
	var body struct{ Text string }
	_ = json.NewDecoder(req.Body).Decode(&body)
	r.texts = append(r.texts, body.Text)
}

func (r *recorder) snapshot() (texts []string, posts int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.texts...), r.posts
}

func start(t *testing.T, hook *Webhook) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = hook.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestWebhookPostsSlackBodiesInOrder(t *testing.T) {
	rec := &recorder{codes: []int{http.StatusServiceUnavailable}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	hook, err := New(srv.URL + "/services/T000/B000/XXXXSECRET")
	require.NoError(t, err)
	hook.pause = time.Millisecond
	start(t, hook)
	hook.Send("first")
	hook.Send("second")
	require.Eventually(t, func() bool { texts, _ := rec.snapshot(); return len(texts) == 2 }, 5*time.Second, 5*time.Millisecond)
	texts, posts := rec.snapshot()
	assert.Equal(t, []string{"first", "second"}, texts, "a 503 is tried again, and order is kept")
	assert.Equal(t, 3, posts)
	assert.Equal(t, "application/json", rec.ctypes[0])
	assert.Equal(t, srv.URL, hook.Host(), "logs show the host only")
}

func TestWebhookGivesUpOnA4xxAtOnce(t *testing.T) {
	rec := &recorder{codes: []int{http.StatusNotFound}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	hook, err := New(srv.URL + "/hook")
	require.NoError(t, err)
	hook.pause = time.Millisecond
	err = hook.post(context.Background(), "x")
	require.ErrorIs(t, err, errPermanent)
	assert.Contains(t, err.Error(), "404")
	_, posts := rec.snapshot()
	assert.Equal(t, 1, posts)
}

func TestWebhookErrorsNeverRepeatTheURL(t *testing.T) {
	hook, err := New("http://127.0.0.1:1/services/T000/B000/XXXXSECRET")
	require.NoError(t, err)
	hook.pause = time.Millisecond
	err = hook.post(context.Background(), "x")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "XXXXSECRET")
}

func TestNewReadsTheURLFromAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "url")
	require.NoError(t, os.WriteFile(path, []byte("https://hooks.example.com/services/T/B/SECRET\n"), 0o600))
	hook, err := New("@" + path)
	require.NoError(t, err)
	assert.Equal(t, "https://hooks.example.com", hook.Host())

	for _, bad := range []string{"", "hooks.example.com/x", "ftp://example.com/", "https:///path/SECRET", "@" + filepath.Join(t.TempDir(), "none")} {
		_, err := New(bad)
		require.Error(t, err, bad)
		assert.NotContains(t, err.Error(), "SECRET")
	}
}

func TestSendNeverBlocks(t *testing.T) {
	hook, err := New("http://127.0.0.1:1/")
	require.NoError(t, err)
	for range queueSize + 10 { // nobody runs the queue
		hook.Send("x")
	}
	assert.Len(t, hook.queue, queueSize)
}

// Stakater Reloader's alert environment and its four sinks: the body each chat service takes,
// Reloader's additional-info prefix, and its proxy.
func TestStakaterAlerts(t *testing.T) {
	type got struct{ contentType, body string }
	tests := []struct {
		sink, wantType, wantBody string
	}{
		{"slack", "application/json", `{"attachments":[{"author_name":"configwave","color":"good","text":"prod : wave detected changes in *configmap/app* in namespace *web*. Hence rolled out *api* of type *Deployment* in namespace *web*"}]}`},
		{"teams", "application/json", `{"text":"prod : wave detected changes in *configmap/app* in namespace *web*. Hence rolled out *api* of type *Deployment* in namespace *web*"}`},
		{"gchat", "application/json", `{"text":"prod : wave detected changes in *configmap/app* in namespace *web*. Hence rolled out *api* of type *Deployment* in namespace *web*"}`},
		{"raw", "text/plain", `prod : wave detected changes in configmap/app in namespace web. Hence rolled out api of type Deployment in namespace web`},
		{"Something-Else", "text/plain", `prod : wave detected changes in configmap/app in namespace web. Hence rolled out api of type Deployment in namespace web`},
	}
	for _, tt := range tests {
		t.Run(tt.sink, func(t *testing.T) {
			seen := make(chan got, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				seen <- got{r.Header.Get("Content-Type"), string(b)}
			}))
			defer srv.Close()
			env := map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_SINK": " " + tt.sink + " ", "ALERT_WEBHOOK_URL": srv.URL + "/hook/s3cr3t", "ALERT_ADDITIONAL_INFO": " prod "}
			e := ReadStakaterEnv(func(k string) string { return env[k] })
			w, err := e.Webhook(false)
			require.NoError(t, err)
			require.NoError(t, w.post(context.Background(), e.Message("configmap/app", "Deployment", "web", "api")))
			g := <-seen
			assert.Equal(t, tt.wantType, g.contentType)
			if tt.wantType == "application/json" {
				assert.JSONEq(t, tt.wantBody, g.body)
			} else {
				assert.Equal(t, tt.wantBody, g.body)
			}
		})
	}

	t.Run("off unless ALERT_ON_RELOAD is true", func(t *testing.T) {
		w, err := ReadStakaterEnv(func(k string) string { return map[string]string{"ALERT_WEBHOOK_URL": "https://x/"}[k] }).Webhook(false)
		require.NoError(t, err)
		assert.Nil(t, w)
	})
	t.Run("on without a URL", func(t *testing.T) {
		_, err := ReadStakaterEnv(func(k string) string { return map[string]string{"ALERT_ON_RELOAD": "true"}[k] }).Webhook(false)
		require.ErrorContains(t, err, "ALERT_WEBHOOK_URL is empty")
	})
	t.Run("through ALERT_WEBHOOK_PROXY", func(t *testing.T) {
		proxied := make(chan string, 1)
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { proxied <- r.URL.String() }))
		defer proxy.Close()
		env := map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_WEBHOOK_URL": "http://chat.example/hook", "ALERT_WEBHOOK_PROXY": proxy.URL}
		w, err := ReadStakaterEnv(func(k string) string { return env[k] }).Webhook(true) // --allow-http-webhooks
		require.NoError(t, err)
		require.NoError(t, w.post(context.Background(), "x"))
		assert.Equal(t, "http://chat.example/hook", <-proxied, "the request went to the proxy")
	})
	t.Run("http:// to another host only when asked", func(t *testing.T) {
		env := map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_WEBHOOK_URL": "http://chat.example/hooks/T0/SECRET"}
		_, err := ReadStakaterEnv(func(k string) string { return env[k] }).Webhook(false)
		require.ErrorContains(t, err, "ALERT_WEBHOOK_URL")
		require.ErrorContains(t, err, "an http:// URL to chat.example")
		assert.ErrorContains(t, err, "--allow-http-webhooks")
		assert.NotContains(t, err.Error(), "SECRET")
	})
}

// An http:// webhook is refused unless it stays in the pod or wave is told to accept it:
// the URL is the credential, and the alerts name workloads.
func TestWebhookRefusesCleartextUnlessAsked(t *testing.T) {
	for _, tc := range []struct {
		url       string
		allowHTTP bool
		ok        bool
	}{
		{"https://hooks.example/T0/SECRET", false, true},
		{"http://hooks.example/T0/SECRET", false, false},
		{"http://10.0.0.7:8080/T0/SECRET", false, false},
		{"http://hooks.example/T0/SECRET", true, true},
		{"http://127.0.0.1:9000/hook", false, true},
		{"http://[::1]:9000/hook", false, true},
		{"http://localhost:9000/hook", false, true},
	} {
		_, err := NewWith(tc.url, Options{AllowHTTP: tc.allowHTTP})
		if tc.ok {
			assert.NoError(t, err, tc.url)
			continue
		}
		require.Error(t, err, tc.url)
		assert.Contains(t, err.Error(), "an http:// URL to ")
		assert.Contains(t, err.Error(), "--allow-http-webhooks")
		assert.NotContains(t, err.Error(), "SECRET", "the URL's path is the credential")
	}
}

// Stopping delivers what is queued within the grace period; what cannot be delivered in it is
// counted as dropped, never silently lost.
func TestRunDeliversQueuedAlertsWhenStopped(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	hook, err := New(srv.URL + "/hook")
	require.NoError(t, err)
	hook.Send("one")
	hook.Send("two")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // stopped before it ran: both wait in the queue
	require.NoError(t, hook.Run(ctx))
	texts, _ := rec.snapshot()
	assert.Equal(t, []string{"one", "two"}, texts)
	assert.Zero(t, hook.Dropped())

	hook, err = New("http://127.0.0.1:1/hook") // nobody listens
	require.NoError(t, err)
	hook.pause, hook.grace = 50*time.Millisecond, 100*time.Millisecond
	for range 3 {
		hook.Send("lost")
	}
	start := time.Now()
	require.NoError(t, hook.Run(ctx))
	assert.Less(t, time.Since(start), 5*time.Second, "bounded by the grace period")
	assert.EqualValues(t, 3, hook.Dropped())
}
