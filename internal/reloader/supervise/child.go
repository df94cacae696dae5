//go:build linux

package supervise

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"
)

// Child is the supervised app of subprocess mode.
type Child struct {
	cmd     *exec.Cmd
	exit    <-chan Exit
	started time.Time
}

// StartChild starts args as the app, with the reloader's stdio and environment. Its exit
// status comes from r, which must be running.
func StartChild(r *Reaper, args []string) (*Child, error) {
	if len(args) == 0 {
		return nil, errors.New("no command after --")
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	exit, err := r.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start the app %q: %w", args[0], err)
	}
	return &Child{cmd: cmd, exit: exit, started: time.Now()}, nil
}

// Signal sends sig to the app.
func (c *Child) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// Pid is the app's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Started is when the app was started.
func (c *Child) Started() time.Time { return c.started }

// Exited receives the app's exit once.
func (c *Child) Exited() <-chan Exit { return c.exit }
