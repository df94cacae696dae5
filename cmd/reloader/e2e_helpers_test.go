package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testpod"
)

var (
	cluster     *testcluster.Cluster
	reloaderBin string
)

// TestMain builds the reloader once and starts one control plane for the package. The test
// binary doubles as the app of subprocess mode when CONFIGWAVE_TEST_APP is set.
func TestMain(m *testing.M) {
	if mode := os.Getenv("CONFIGWAVE_TEST_APP"); mode != "" {
		os.Exit(testApp(mode))
	}
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	bin, remove, err := testcluster.BuildCommand(".", "reloader")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	reloaderBin = bin
	code := testcluster.Run(m, &cluster)
	remove()
	testpod.Cleanup() // the real-node test's images and binaries
	os.Exit(code)
}

// testApp is the app of subprocess mode: it appends "start:<config>" when it starts,
// "hup:<config>" on every SIGHUP, where <config> is the content of $CONFIG_FILE at that moment,
// and exits $TERM_EXIT on SIGTERM, or $EXIT_NOW at once when set. With $ORPHAN_PID_FILE set
// it first leaves an orphan behind: a shell that starts "sleep 2" in the background and exits,
// writing the sleep's PID to that file. With $HANDLER_DELAY it appends "boot:<config>" and waits
// that long before it installs its handlers, as a slow starter does.
func testApp(mode string) int {
	if code := os.Getenv("EXIT_NOW"); code != "" {
		n, _ := strconv.Atoi(code)
		return n
	}
	if f := os.Getenv("ORPHAN_PID_FILE"); f != "" {
		if err := exec.Command("sh", "-c", `sleep 2 & echo $! > "$ORPHAN_PID_FILE"`).Run(); err != nil {
			return 101
		}
	}
	out, err := os.OpenFile(os.Getenv("APP_OUT"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return 100
	}
	record := func(what string) {
		b, err := os.ReadFile(os.Getenv("CONFIG_FILE"))
		if err != nil {
			b = []byte("<" + err.Error() + ">")
		}
		fmt.Fprintf(out, "%s:%s\n", what, b)
	}
	if os.Getenv("IGNORE_SIGNALS") != "" { // an app that ignores both HUP and TERM
		signal.Ignore(syscall.SIGHUP, syscall.SIGTERM)
		record("start")
		select {}
	}
	if d, err := time.ParseDuration(os.Getenv("HANDLER_DELAY")); err == nil { // a slow starter
		record("boot")
		time.Sleep(d)
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM)
	record("start")
	for s := range sigs {
		if s == syscall.SIGTERM {
			fmt.Fprintln(out, "term")
			n, _ := strconv.Atoi(os.Getenv("TERM_EXIT"))
			return n
		}
		record("hup")
	}
	return 0
}

func adminClient(t testing.TB) kubernetes.Interface {
	t.Helper()
	testcluster.Need(t, cluster)
	client, err := kubernetes.NewForConfig(cluster.Config())
	require.NoError(t, err)
	return client
}

// startReloader runs the reloader with the admin kubeconfig (unless args name one) and a
// loopback listen address.
func startReloader(t testing.TB, env []string, args ...string) *testcluster.Process {
	t.Helper()
	addr := testcluster.FreeAddr(t)
	full := []string{"--listen-address=" + addr, "--v=2"}
	if !hasFlag(args, "--kubeconfig") {
		full = append(full, "--kubeconfig="+cluster.Kubeconfig())
	}
	p := testcluster.StartProcess(t, reloaderBin, env, append(full, args...)...)
	p.Addr = addr
	return p
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// fakeApp is the app of sidecar mode: a reload endpoint that records, for every request,
// the content of one config file at the moment the request arrived.
type fakeApp struct {
	srv    *httptest.Server
	file   string
	mu     sync.Mutex
	seen   []string
	at     []time.Time
	method string
	header http.Header
	status func(n int) int // answer to the nth request (1-based)
}

func newFakeApp(t testing.TB, file string) *fakeApp {
	a := &fakeApp{file: file, status: func(int) int { return 200 }}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := os.ReadFile(a.file)
		if err != nil {
			b = []byte("<" + err.Error() + ">")
		}
		a.mu.Lock()
		a.seen = append(a.seen, string(b))
		a.at = append(a.at, time.Now())
		a.method, a.header = r.Method, r.Header.Clone()
		n := len(a.seen)
		a.mu.Unlock()
		w.WriteHeader(a.status(n))
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *fakeApp) url() string { return a.srv.URL + "/-/reload" }

func (a *fakeApp) reloads() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

func readFile(root, name string) string {
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

const (
	eventually = 30 * time.Second
	tick       = 10 * time.Millisecond
)

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// reloaderStatus is the part of /status the tests read.
type reloaderStatus struct {
	Ready         bool   `json:"ready"`
	LiveHash      string `json:"liveHash"`
	NotifyPending bool   `json:"notifyPending"`
	LastResult    string `json:"lastResult"`
	LastError     string `json:"lastError"`
	ReloadError   string `json:"lastReloadError"`
}

func status(t testing.TB, p *testcluster.Process) reloaderStatus {
	t.Helper()
	code, body := p.Get("/status")
	require.Equal(t, http.StatusOK, code, body)
	var s reloaderStatus
	require.NoError(t, json.Unmarshal([]byte(body), &s), body)
	return s
}

// upToDate reports whether the newest config is live and the app took it (the alert metric).
func upToDate(p *testcluster.Process) bool {
	return p.Metric("configwave_reloader_last_reload_successful") == 1
}

// failingButReady reports the new readiness rule: a config problem shows in the alert metric and
// /status, while the replica stays ready, serving with the last good config.
func failingButReady(p *testcluster.Process) bool {
	return p.Metric("configwave_reloader_last_reload_successful") == 0 && p.Ready()
}

// reloadRequest is what a recorded reload request carried.
type reloadRequest struct{ method, body, contentType, user, password string }

// reloadEndpoint is an app's reload API that records each request; next waits for the next one.
type reloadEndpoint struct {
	*httptest.Server
	got chan reloadRequest
}

func newReloadEndpoint(t testing.TB) *reloadEndpoint {
	e := &reloadEndpoint{got: make(chan reloadRequest, 10)}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		user, password, _ := r.BasicAuth()
		e.got <- reloadRequest{r.Method + " " + r.URL.Path, string(b), r.Header.Get("Content-Type"), user, password}
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *reloadEndpoint) next(t testing.TB, p *testcluster.Process) reloadRequest {
	t.Helper()
	select {
	case r := <-e.got:
		return r
	case <-time.After(eventually):
		t.Fatalf("no reload request: %s", p.Log())
	}
	return reloadRequest{}
}
