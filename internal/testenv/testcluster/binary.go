package testcluster

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BuildCommand builds the main package in dir (absolute, or relative to the working
// directory; built from inside dir, so any module works) into a fresh temporary folder and returns the binary's path and a function that removes it. Under
// `go test -race` the binary is built with -race too, so the end-to-end tests also look for
// data races in the real processes.
func BuildCommand(dir, name string) (string, func(), error) {
	var flags []string
	if raceEnabled {
		flags = append(flags, "-race")
	}
	return build(dir, name, nil, flags)
}

// BuildRelease builds the main package in dir as the Dockerfile builds the image's binaries:
// static, with no symbol table, so that a benchmark measures the size and memory of the
// binary users run.
func BuildRelease(dir, name string) (string, func(), error) {
	return build(dir, name, []string{"CGO_ENABLED=0"}, []string{"-trimpath", "-ldflags=-s -w"})
}

func build(dir, name string, env, flags []string) (string, func(), error) {
	tmp, err := os.MkdirTemp("", "configwave-bin-")
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(tmp, name)
	args := append([]string{"build", "-o", bin}, flags...)
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(tmp)
		return "", nil, fmt.Errorf("build %s: %w", dir, err)
	}
	return bin, func() { _ = os.RemoveAll(tmp) }, nil
}

// FreeAddr returns a loopback address with a port nobody listens on right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Process is one of our binaries running under a test, with its operational endpoints on
// Addr. It is stopped (SIGTERM, then SIGKILL after 15 s) when the test ends, and its log is
// printed if the test failed.
type Process struct {
	Cmd  *exec.Cmd
	Addr string
	// HTTPS, when set, is the client Get uses, over https (an app that serves TLS).
	HTTPS *http.Client
	log   string
	done  chan struct{}
	code  int
}

// StartProcess runs bin with args and the extra environment.
func StartProcess(t testing.TB, bin string, env []string, args ...string) *Process {
	t.Helper()
	p := &Process{log: filepath.Join(t.TempDir(), filepath.Base(bin)+".log"), done: make(chan struct{})}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Stdout, p.Cmd.Stderr = logf, logf
	p.Cmd.Env = append(append(os.Environ(), "GORACE=atexit_sleep_ms=0"), env...)
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		_ = p.Cmd.Wait()
		p.code = p.Cmd.ProcessState.ExitCode()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop(15 * time.Second)
		if strings.Contains(p.Log(), "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race", filepath.Base(bin))
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", filepath.Base(bin), logTail(p.Log(), failedLogLines))
		}
	})
	return p
}

// failedLogLines bounds the log a failed test prints per process: a test that starts a dozen
// processes printed thousands of lines, and CI keeps only the end of the output, so the
// assertion that failed (printed first) was lost.
const failedLogLines = 60

// logTail returns the last n lines of log, and every data race report in full.
func logTail(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	if len(lines) <= n {
		return log
	}
	var races []string
	in := false
	for _, l := range lines[:len(lines)-n] {
		in = in || strings.Contains(l, "WARNING: DATA RACE")
		if in {
			races = append(races, l)
		}
		in = in && l != "=================="
	}
	head := fmt.Sprintf("[%d earlier lines left out]", len(lines)-n)
	if len(races) > 0 {
		head = strings.Join(races, "\n") + "\n" + head
	}
	return head + "\n" + strings.Join(lines[len(lines)-n:], "\n")
}

// Stop sends SIGTERM and waits up to grace before SIGKILL.
func (p *Process) Stop(grace time.Duration) {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.Cmd.Process.Kill()
		<-p.done
	}
}

// Kill ends the process at once, as a crash or a node failure would.
func (p *Process) Kill() {
	_ = p.Cmd.Process.Kill()
	<-p.done
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait returns the exit code, failing the test after timeout.
func (p *Process) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		t.Fatalf("%s still running after %s", p.Cmd.Path, timeout)
		return -1
	}
}

// Log is what the process wrote so far.
func (p *Process) Log() string { b, _ := os.ReadFile(p.log); return string(b) }

// Get requests a path on Addr and returns the status code and body.
func (p *Process) Get(path string) (int, string) {
	client, scheme := http.DefaultClient, "http://"
	if p.HTTPS != nil {
		client, scheme = p.HTTPS, "https://"
	}
	resp, err := client.Get(scheme + p.Addr + path)
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

// Ready reports whether /readyz answers 200.
func (p *Process) Ready() bool { code, _ := p.Get("/readyz"); return code == 200 }

// WaitReady waits until /readyz answers 200, failing the test if the process exits first.
func (p *Process) WaitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !p.Ready() {
		if p.Exited() {
			t.Fatalf("%s exited with code %d before it was ready", filepath.Base(p.Cmd.Path), p.code)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 30s", filepath.Base(p.Cmd.Path))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Metric returns one series' value from /metrics, e.g. `x_total{result="ok"}`; -1 if absent.
func (p *Process) Metric(series string) float64 {
	_, body := p.Get("/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}
