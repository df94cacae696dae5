//go:build linux

package supervise

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/reloader/notify"
)

// The test binary doubles as the app: with CONFIGWAVE_TEST_APP set, TestMain runs one of the
// behaviours below instead of the tests.
func TestMain(m *testing.M) {
	switch os.Getenv("CONFIGWAVE_TEST_APP") {
	case "":
		os.Exit(m.Run())
	case "trap":
		trapApp()
	case "exit":
		code, _ := strconv.Atoi(os.Getenv("CONFIGWAVE_TEST_EXIT"))
		os.Exit(code)
	case "orphan":
		// Start a grandchild that outlives us, then exit: it becomes an orphan. It sleeps long
		// enough to be alive when the test looks at it however slow the machine; the test kills
		// it then.
		cmd := exec.Command("sleep", "60")
		_ = cmd.Start()
		fmt.Println(cmd.Process.Pid)
		os.Exit(0)
	}
}

// trapApp records every HUP in a file and exits 3 on TERM, like an app that reloads on HUP.
func trapApp() {
	out := os.Getenv("CONFIGWAVE_TEST_OUT")
	sigs := make(chan os.Signal, 8)
	signalNotify(sigs, syscall.SIGHUP, syscall.SIGTERM)
	_ = os.WriteFile(out+".ready", nil, 0o644)
	n := 0
	for s := range sigs {
		if s == syscall.SIGTERM {
			os.Exit(3)
		}
		n++
		_ = os.WriteFile(out, []byte(strconv.Itoa(n)), 0o644)
	}
}

func startApp(t *testing.T, r *Reaper, mode string, env ...string) (*Child, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	self, err := os.Executable()
	require.NoError(t, err)
	t.Setenv("CONFIGWAVE_TEST_APP", mode)
	t.Setenv("GORACE", "atexit_sleep_ms=0") // under -race a child would linger 1 s after exit
	t.Setenv("CONFIGWAVE_TEST_OUT", out)
	for i := 0; i+1 < len(env); i += 2 {
		t.Setenv(env[i], env[i+1])
	}
	c, err := StartChild(r, []string{self})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Signal(syscall.SIGKILL) })
	return c, out
}

func runReaper(t *testing.T, adopt bool) *Reaper {
	t.Helper()
	r, err := NewReaper(adopt)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

func TestChildReloadSignalAndExitCode(t *testing.T) {
	r := runReaper(t, false)
	c, out := startApp(t, r, "trap")
	require.Eventually(t, func() bool { _, err := os.Stat(out + ".ready"); return err == nil }, 10*time.Second, 10*time.Millisecond)

	hup := &notify.Signal{Process: c, Sig: syscall.SIGHUP}
	require.NoError(t, hup.Notify(context.Background()))
	require.Eventually(t, func() bool { b, _ := os.ReadFile(out); return string(b) == "1" }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, hup.Notify(context.Background()))
	require.Eventually(t, func() bool { b, _ := os.ReadFile(out); return string(b) == "2" }, 5*time.Second, 10*time.Millisecond)

	require.NoError(t, c.Signal(syscall.SIGTERM))
	select {
	case e := <-c.Exited():
		assert.Equal(t, 3, e.Code(), "the app's own exit code")
	case <-time.After(10 * time.Second):
		t.Fatal("the app did not exit after SIGTERM")
	}
	assert.Error(t, hup.Notify(context.Background()), "signalling an app that is gone is an error")
}

func TestChildExitCodes(t *testing.T) {
	r := runReaper(t, false)
	for _, code := range []int{0, 1, 42} {
		c, _ := startApp(t, r, "exit", "CONFIGWAVE_TEST_EXIT", strconv.Itoa(code))
		select {
		case e := <-c.Exited():
			assert.Equal(t, code, e.Code())
		case <-time.After(10 * time.Second):
			t.Fatal("no exit")
		}
	}
	c, _ := startApp(t, r, "trap")
	require.NoError(t, c.Signal(syscall.SIGKILL))
	e := <-c.Exited()
	assert.Equal(t, 128+9, e.Code(), "killed by a signal reports 128+signal, as a shell does")
	assert.Equal(t, "killed by signal killed", e.String())
}

func TestReaperAdoptsOrphans(t *testing.T) {
	r := runReaper(t, true)
	t.Cleanup(func() { _ = unixPrctlSubreaper(0) })
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "CONFIGWAVE_TEST_APP=orphan", "GORACE=atexit_sleep_ms=0")
	outFile, err := os.Create(filepath.Join(t.TempDir(), "pid"))
	require.NoError(t, err)
	defer outFile.Close()
	cmd.Stdout = outFile
	exited, err := r.Start(cmd)
	require.NoError(t, err)
	<-exited
	b, err := os.ReadFile(outFile.Name())
	require.NoError(t, err)
	pid, err := strconv.Atoi(string(b[:len(b)-1]))
	require.NoError(t, err)
	killed := false
	t.Cleanup(func() {
		if !killed { // still sleeping, and our child until reaped: the pid is still its
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	// The grandchild is re-parented to us (not to the machine's init, which would reap it
	// whatever we do) and, once it ends, must not stay a zombie.
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err, "the grandchild should still be sleeping")
	// Its parent has been reaped (<-exited), so the re-parenting has already happened.
	assert.Contains(t, string(status), fmt.Sprintf("\nPPid:\t%d\n", os.Getpid()))
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	killed = true
	require.Eventually(t, func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return os.IsNotExist(err)
	}, 10*time.Second, 20*time.Millisecond, "orphan %d was not reaped", pid)
}

func TestReaperRejectsPipedStdio(t *testing.T) {
	r, err := NewReaper(false)
	require.NoError(t, err)
	cmd := exec.Command("true")
	cmd.Stdout = &bytesWriter{}
	_, err = r.Start(cmd)
	assert.ErrorContains(t, err, "stdio must be *os.File")
}

type bytesWriter struct{}

func (*bytesWriter) Write(p []byte) (int, error) { return len(p), nil }
