package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
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

	"github.com/configwave/configwave/internal/testcluster"
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
	dir, err := os.MkdirTemp("", "configwave-reloader-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	reloaderBin = filepath.Join(dir, "reloader")
	build := exec.Command("go", "build", "-o", reloaderBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "build reloader: %v\n", err)
		os.Exit(1)
	}
	code := testcluster.Run(m, &cluster)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// testApp is the app of subprocess mode: it appends "start:<config>" when it starts,
// "hup:<config>" on every SIGHUP, where <config> is the content of $CONFIG_FILE at that moment,
// and exits $TERM_EXIT on SIGTERM, or $EXIT_NOW at once when set.
func testApp(mode string) int {
	if code := os.Getenv("EXIT_NOW"); code != "" {
		n, _ := strconv.Atoi(code)
		return n
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

// proc is one reloader process under test.
type proc struct {
	cmd  *exec.Cmd
	log  string
	addr string // /healthz, /readyz, /metrics
	done chan struct{}
	code int
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// startReloader runs the reloader with the admin kubeconfig (unless args name one) and a
// loopback listen address; it is stopped when the test ends, and its log printed on failure.
func startReloader(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{log: filepath.Join(t.TempDir(), "reloader.log"), addr: freeAddr(t), done: make(chan struct{})}
	full := []string{"--listen-address=" + p.addr, "--v=2"}
	if !hasFlag(args, "--kubeconfig") {
		full = append(full, "--kubeconfig="+cluster.Kubeconfig())
	}
	full = append(full, args...)
	logf, err := os.Create(p.log)
	require.NoError(t, err)
	p.cmd = exec.Command(reloaderBin, full...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.Env = append(append(os.Environ(), "GORACE=atexit_sleep_ms=0"), env...)
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			t.Logf("reloader log:\n%s", b)
		}
	})
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

func (p *proc) get(path string) (int, string) {
	resp, err := http.Get("http://" + p.addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		sb.WriteString(sc.Text() + "\n")
	}
	return resp.StatusCode, sb.String()
}

func (p *proc) ready() bool { code, _ := p.get("/readyz"); return code == 200 }

func (p *proc) waitReady(t testing.TB) {
	t.Helper()
	require.Eventually(t, func() bool {
		select {
		case <-p.done:
			return true
		default:
		}
		return p.ready()
	}, 30*time.Second, 20*time.Millisecond, "reloader did not become ready")
	select {
	case <-p.done:
		t.Fatalf("reloader exited with code %d", p.code)
	default:
	}
}

// metric returns the value of one series from /metrics, e.g.
// `configwave_reloader_reloads_total{result="success"}`; -1 when absent.
func (p *proc) metric(series string) float64 {
	_, body := p.get("/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

func (p *proc) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		t.Fatalf("reloader still running after %s", timeout)
		return -1
	}
}

func (p *proc) logText() string { b, _ := os.ReadFile(p.log); return string(b) }

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
