package podevents

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	"github.com/configwave/configwave/internal/reloader/coreclient"
)

// eventsAPI is an API server for one namespace's events: it keeps what is posted and applies
// count patches, and fails requests while failing is above zero.
type eventsAPI struct {
	t       *testing.T
	mu      sync.Mutex
	events  map[string]*coreclient.Event
	creates int
	patches int
	failing int
	got     chan struct{}
}

func (a *eventsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	defer func() {
		select {
		case a.got <- struct{}{}:
		default:
		}
	}()
	if a.failing > 0 {
		a.failing--
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"InternalError","code":500}`)
		return
	}
	body, err := io.ReadAll(r.Body)
	require.NoError(a.t, err)
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/namespaces/web/events":
		obj, _, err := serializer.NewCodecFactory(coreclient.Scheme).UniversalDeserializer().Decode(body, nil, nil)
		require.NoError(a.t, err)
		ev := obj.(*coreclient.Event)
		a.events[ev.Name] = ev
		a.creates++
		writeJSON(w, ev)
	case r.Method == http.MethodPatch && strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/web/events/"):
		name := strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/web/events/")
		ev, ok := a.events[name]
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
			return
		}
		assert.Equal(a.t, "application/merge-patch+json", r.Header.Get("Content-Type"))
		require.NoError(a.t, json.Unmarshal(body, ev))
		a.patches++
		writeJSON(w, ev)
	default:
		a.t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
		w.WriteHeader(http.StatusNotFound)
	}
}

func writeJSON(w http.ResponseWriter, obj runtime.Object) {
	obj.GetObjectKind().SetGroupVersionKind(coreclient.GroupVersion.WithKind("Event"))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(obj)
}

func (a *eventsAPI) snapshot() (events []coreclient.Event, creates, patches int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ev := range a.events {
		events = append(events, *ev)
	}
	return events, a.creates, a.patches
}

func newRecorder(t *testing.T) (*Recorder, *eventsAPI) {
	api := &eventsAPI{t: t, events: map[string]*coreclient.Event{}, got: make(chan struct{}, 1)}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	client, err := coreclient.New(&rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000})
	require.NoError(t, err)
	return New(client, Pod{Namespace: "web", Name: "app-0", UID: "uid-1"}), api
}

func run(t *testing.T, r *Recorder) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestRepeatedEventRaisesTheCount(t *testing.T) {
	r, api := newRecorder(t)
	run(t, r)
	r.Event("Warning", "ConfigRejected", "check failed")
	r.Event("Warning", "ConfigRejected", "check failed")
	r.Event("Normal", "ConfigReloaded", "app reloaded")
	r.Event("Warning", "ConfigRejected", "check failed")
	require.Eventually(t, func() bool { _, c, p := api.snapshot(); return c+p == 4 }, 5*time.Second, 10*time.Millisecond)

	events, creates, patches := api.snapshot()
	assert.Equal(t, 2, creates)
	assert.Equal(t, 2, patches)
	counts := map[string]int32{}
	for _, ev := range events {
		counts[ev.Reason] = ev.Count
		assert.Equal(t, coreclient.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "web", Name: "app-0", UID: "uid-1"}, ev.InvolvedObject)
		assert.Equal(t, Component, ev.Source.Component)
		assert.True(t, strings.HasPrefix(ev.Name, "app-0."), ev.Name)
	}
	assert.Equal(t, map[string]int32{"ConfigRejected": 3, "ConfigReloaded": 1}, counts)
}

func TestExpiredEventIsPostedAnew(t *testing.T) {
	r, api := newRecorder(t)
	run(t, r)
	r.Event("Normal", "ConfigReloaded", "app reloaded")
	require.Eventually(t, func() bool { _, c, _ := api.snapshot(); return c == 1 }, 5*time.Second, 10*time.Millisecond)
	api.mu.Lock()
	clear(api.events) // the API server's hour is up
	api.mu.Unlock()
	r.Event("Normal", "ConfigReloaded", "app reloaded")
	require.Eventually(t, func() bool { _, c, _ := api.snapshot(); return c == 2 }, 5*time.Second, 10*time.Millisecond)
	events, _, patches := api.snapshot()
	assert.Equal(t, 0, patches)
	require.Len(t, events, 1)
	assert.Equal(t, int32(1), events[0].Count)
}

func TestServerErrorIsRetried(t *testing.T) {
	r, api := newRecorder(t)
	api.failing = 1
	run(t, r)
	r.Event("Warning", "ReloadFailed", "app not told")
	require.Eventually(t, func() bool { _, c, _ := api.snapshot(); return c == 1 }, 5*time.Second, 10*time.Millisecond)
}

func TestSpamLimitDropsPastTheBurst(t *testing.T) {
	r, api := newRecorder(t)
	run(t, r)
	for i := 0; i < 40; i++ {
		r.Event("Normal", "ConfigReloaded", strings.Repeat("x", i+1))
		time.Sleep(time.Millisecond) // the queue is not what is tested here
	}
	require.Eventually(t, func() bool { _, c, _ := api.snapshot(); return c == spamBurst }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	_, creates, _ := api.snapshot()
	assert.Equal(t, spamBurst, creates)
}

func TestFullQueueDropsInsteadOfBlocking(t *testing.T) {
	r, api := newRecorder(t)
	r.spam = rate.NewLimiter(rate.Inf, 0)
	// Nothing posts yet: the queue fills, and Event must still return at once.
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		for i := 0; i < 100; i++ {
			r.Event("Normal", "ConfigReloaded", strings.Repeat("x", i+1))
		}
	}()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Event blocked with nothing posting")
	}
	run(t, r)
	require.Eventually(t, func() bool { _, c, _ := api.snapshot(); return c == queueLen }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	_, creates, _ := api.snapshot()
	assert.Equal(t, queueLen, creates)
}

func TestLongMessageIsCutOnARuneBoundary(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
	}{
		{"ascii", strings.Repeat("a", 3000)},
		{"multibyte", strings.Repeat("é", 1500)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := truncate(tc.in, maxMessage)
			assert.LessOrEqual(t, len(got), maxMessage)
			assert.True(t, strings.HasSuffix(got, "…"))
			assert.True(t, utf8.ValidString(got))
		})
	}
}

// An Event about an object by its UID (a ConfigMap's, so that `kubectl describe configmap`
// shows it); the same words about the object made again are another Event.
func TestEventAboutCarriesTheObjectsUID(t *testing.T) {
	api := &eventsAPI{t: t, events: map[string]*coreclient.Event{}, got: make(chan struct{}, 1)}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	client, err := coreclient.New(&rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000})
	require.NoError(t, err)
	r := New(client, Pod{Kind: "ConfigMap", Namespace: "web", Name: "app"})
	run(t, r)
	r.EventAbout("uid-a", "Warning", "ConfigRejected", "config rejected")
	r.EventAbout("uid-b", "Warning", "ConfigRejected", "config rejected")
	require.Eventually(t, func() bool { _, c, p := api.snapshot(); return c+p == 2 }, 5*time.Second, 10*time.Millisecond)
	events, creates, _ := api.snapshot()
	assert.Equal(t, 2, creates, "one Event for each object")
	var uids []string
	for _, ev := range events {
		assert.Equal(t, "ConfigMap", ev.InvolvedObject.Kind)
		uids = append(uids, string(ev.InvolvedObject.UID))
	}
	assert.ElementsMatch(t, []string{"uid-a", "uid-b"}, uids)
}
