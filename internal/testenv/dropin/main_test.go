package dropin

import (
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testpod"
)

// cluster is shared by the package's tests: the launches that read the API each make their own
// namespace in it.
var cluster *testcluster.Cluster

func TestMain(m *testing.M) {
	code := testcluster.Run(m, &cluster)
	testpod.Cleanup()
	os.Exit(code)
}

const eventually = 30 * time.Second

// recordingApp stands for the app a reloader tells: it answers every request 200 and keeps what
// it was asked, in the pod's network.
type recordingApp struct {
	mu   sync.Mutex
	got  []request
	wake chan struct{}
}

type request struct {
	Method, Path, Body string
	Header             http.Header
}

func newRecordingApp(t *testing.T, pod *testpod.Pod, addr string) *recordingApp {
	t.Helper()
	a := &recordingApp{wake: make(chan struct{}, 100)}
	ln, err := pod.Netns.Listen(addr)
	require.NoError(t, err, "the app's address %s in the pod", addr)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.got = append(a.got, request{Method: r.Method, Path: r.URL.Path, Body: string(b), Header: r.Header.Clone()})
		a.mu.Unlock()
		a.wake <- struct{}{}
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return a
}

// requests are what the app was asked so far.
func (a *recordingApp) requests() []request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]request(nil), a.got...)
}

// next waits for the app's next request, failing the test after eventually.
func (a *recordingApp) next(t *testing.T, c *testcluster.Process) request {
	t.Helper()
	select {
	case <-a.wake:
		r := a.requests()
		return r[len(r)-1]
	case <-time.After(eventually):
		t.Fatalf("the app was told nothing in %s; the container's log:\n%s", eventually, c.Log())
		return request{}
	}
}

// quiet asserts the app is told nothing for d.
func (a *recordingApp) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-a.wake:
		t.Fatalf("the app was told %+v", a.requests())
	case <-time.After(d):
	}
}
