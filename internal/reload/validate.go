package reload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/configwave/configwave/internal/supervise"
)

// Command checks a new config set before it goes live: it runs Shell with `sh -c` in the new
// folder, which has the same layout as the config root, and with $CONFIG_DIR set to it, e.g.
// `nginx -t -c "$CONFIG_DIR/nginx.conf"` or `promtool check config prometheus.yml`.
type Command struct {
	Shell   string
	Timeout time.Duration // default 1 minute
	Reaper  *supervise.Reaper
	// ShowOutput allows the command's output in the error. It is off when a Secret is among
	// the sources: a checker may quote the line it rejects, and that line may hold a secret.
	ShowOutput bool
}

// ErrRejected wraps every failure of the command itself, as opposed to a failure to run it.
var ErrRejected = errors.New("validation command rejected the new config")

// Check runs the command against dir.
func (c *Command) Check(ctx context.Context, dir string) error {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	out, err := os.CreateTemp("", "configwave-validate-*.log")
	if err != nil {
		return fmt.Errorf("validation command: %w", err)
	}
	defer os.Remove(out.Name())
	defer out.Close()

	cmd := exec.Command("/bin/sh", "-c", c.Shell)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CONFIG_DIR="+dir)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so a timeout stops its children too
	exited, err := c.Reaper.Start(cmd)
	if err != nil {
		return fmt.Errorf("start validation command %q: %w (the reloader's image needs /bin/sh and the checker)", c.Shell, err)
	}
	var exit supervise.Exit
	select {
	case exit = <-exited:
	case <-time.After(timeout):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		return fmt.Errorf("%w: %q did not finish within %s", ErrRejected, c.Shell, timeout)
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		return ctx.Err()
	}
	if exit.Code() == 0 {
		return nil
	}
	detail := "output withheld because a Secret is among the sources; run the command by hand to see it"
	if c.ShowOutput {
		detail = "output: " + tail(out, 2048)
	}
	return fmt.Errorf("%w: %q ended with %s (%s)", ErrRejected, c.Shell, exit, detail)
}

// tail returns up to n bytes from the end of f, on one line.
func tail(f *os.File, n int64) string {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return ""
	}
	start := max(size-n, 0)
	b := make([]byte, size-start)
	if _, err := f.ReadAt(b, start); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	return strings.Join(strings.Fields(string(b)), " ")
}
