package alert

import (
	"context"
	"encoding/json"
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
