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

	"github.com/configwave/configwave/internal/reloader/supervise"
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

// Check runs the command against dir. Its output is collected through a pipe, not a temporary
// file: under the restricted Pod Security profile only --configroot may be writable.
func (c *Command) Check(ctx context.Context, dir string) error {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("validation command: %w", err)
	}
	defer pr.Close()
	out := &tailBuffer{max: 2048}
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(out, pr); close(copied) }()

	cmd := exec.Command("/bin/sh", "-c", c.Shell)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CONFIG_DIR="+dir)
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so a timeout stops its children too
	exited, err := c.Reaper.Start(cmd)
	pw.Close() // the child has its own copy; ours would keep the pipe open forever
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
	// A process the command left in the background may hold the pipe open: take what came
	// within a moment and stop reading.
	_ = pr.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	<-copied
	detail := "output withheld because a Secret is among the sources; run the command by hand to see it"
	if c.ShowOutput {
		detail = "output: " + out.String()
	}
	return fmt.Errorf("%w: %q ended with %s (%s)", ErrRejected, c.Shell, exit, detail)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String is the tail on one line.
func (t *tailBuffer) String() string { return strings.Join(strings.Fields(string(t.b)), " ") }
