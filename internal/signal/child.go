//go:build linux

package signal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	ossignal "os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Reaper owns the exit statuses of the processes the reloader starts (the app and validation
// commands) and, when it adopts orphans, of every descendant that ends up its child.
//
// Why not exec.Cmd.Wait: as PID 1 of a container (or a child subreaper) the reloader inherits
// every orphaned descendant of the app, and must wait for them or they stay zombies forever.
// A wait4(-1) loop that reaps them would steal the status of a process some exec.Cmd is
// waiting for, so every process the reloader starts goes through Start and gets its status
// from here.
type Reaper struct {
	adopt bool // reap every child, known or not (PID 1 or subreaper)

	mu      sync.Mutex
	waiting map[int]chan Exit
}

// Exit is how a process ended.
type Exit struct {
	Pid    int
	Status syscall.WaitStatus
}

// Code is the exit code a shell would report: the process's own code, or 128+signal.
func (e Exit) Code() int {
	if e.Status.Signaled() {
		return 128 + int(e.Status.Signal())
	}
	return e.Status.ExitStatus()
}

func (e Exit) String() string {
	if e.Status.Signaled() {
		return "killed by signal " + e.Status.Signal().String()
	}
	return fmt.Sprintf("exit code %d", e.Status.ExitStatus())
}

// NewReaper returns a Reaper. With adopt it also reaps unknown children, and makes this
// process a child subreaper so that orphans of the app are re-parented to it rather than to
// the node's init; adopt is what a container's PID 1 needs.
func NewReaper(adopt bool) (*Reaper, error) {
	if adopt && os.Getpid() != 1 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return nil, fmt.Errorf("become a child subreaper: %w", err)
		}
	}
	return &Reaper{adopt: adopt, waiting: map[int]chan Exit{}}, nil
}

// Start starts cmd and returns a channel that receives its exit once. cmd's Stdin, Stdout and
// Stderr must be nil or *os.File, so that no copying goroutine waits for cmd.Wait, which is
// never called.
func (r *Reaper) Start(cmd *exec.Cmd) (<-chan Exit, error) {
	for _, f := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		if _, ok := f.(*os.File); f != nil && !ok {
			return nil, errors.New("reaper: command stdio must be *os.File or nil")
		}
	}
	// Holding the lock across the fork means the reaping loop, which takes the same lock
	// before it looks a pid up, cannot see this pid before it is registered.
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := make(chan Exit, 1)
	r.waiting[cmd.Process.Pid] = ch
	return ch, nil
}

// Run reaps children on every SIGCHLD until ctx ends.
func (r *Reaper) Run(ctx context.Context) {
	sigs := make(chan os.Signal, 1)
	ossignal.Notify(sigs, syscall.SIGCHLD)
	defer ossignal.Stop(sigs)
	for {
		r.reap() // also covers children that ended before Notify was in place
		select {
		case <-ctx.Done():
			return
		case <-sigs:
		}
	}
}

func (r *Reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for pid, ch := range r.waiting {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if got == pid || errors.Is(err, syscall.ECHILD) {
			ch <- Exit{Pid: pid, Status: ws}
			delete(r.waiting, pid)
		}
	}
	if !r.adopt {
		return
	}
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		if ch, ok := r.waiting[pid]; ok {
			ch <- Exit{Pid: pid, Status: ws}
			delete(r.waiting, pid)
			continue
		}
		klog.V(2).InfoS("reaped an orphaned process", "pid", pid, "exit", Exit{Pid: pid, Status: ws}.String())
	}
}

// Child is the supervised app of subprocess mode.
type Child struct {
	cmd        *exec.Cmd
	exit       <-chan Exit
	sig        syscall.Signal
	signalFrom time.Time // no reload signal before this
}

// StartChild starts args as the app, with the reloader's stdio and environment, in its own
// process group so that a signal meant for it reaches its whole group as a shell would deliver
// it; reload is the signal Notify sends, never sooner than startupGrace after the start.
//
// Why the grace: most programs die of a SIGHUP that arrives before they install a handler, so a
// change that lands while the app is still starting would kill it instead of reloading it.
func StartChild(r *Reaper, args []string, reload syscall.Signal, startupGrace time.Duration) (*Child, error) {
	if len(args) == 0 {
		return nil, errors.New("no command after --")
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	exit, err := r.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start the app %q: %w", args[0], err)
	}
	return &Child{cmd: cmd, exit: exit, sig: reload, signalFrom: time.Now().Add(startupGrace)}, nil
}

// Notify sends the reload signal, after waiting out the rest of the startup grace.
func (c *Child) Notify(ctx context.Context) error {
	if wait := time.Until(c.signalFrom); wait > 0 {
		klog.V(2).InfoS("app started moments ago; holding the reload signal until its startup grace is over", "wait", wait)
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := c.Signal(c.sig); err != nil {
		return fmt.Errorf("send %s to the app (pid %d): %w", unix.SignalName(c.sig), c.cmd.Process.Pid, err)
	}
	return nil
}

// Signal sends sig to the app.
func (c *Child) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// Pid is the app's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Exited receives the app's exit once.
func (c *Child) Exited() <-chan Exit { return c.exit }

// ParseSignal accepts HUP, SIGHUP, hup or a number, of a signal the app can catch.
func ParseSignal(s string) (syscall.Signal, error) {
	var sig syscall.Signal
	if n, err := strconv.Atoi(s); err == nil {
		if n <= 0 || n > 64 {
			return 0, fmt.Errorf("signal %q: number out of range 1-64", s)
		}
		sig = syscall.Signal(n)
	} else {
		name := strings.ToUpper(strings.TrimSpace(s))
		if !strings.HasPrefix(name, "SIG") {
			name = "SIG" + name
		}
		if sig = unix.SignalNum(name); sig == 0 {
			return 0, fmt.Errorf("signal %q is not known; use a name such as HUP, USR1, TERM or a number", s)
		}
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGSTOP {
		// Sent on every change, these would kill or freeze the app instead of reloading it.
		return 0, fmt.Errorf("signal %q cannot be caught by the app; use one it handles, such as HUP or USR1", s)
	}
	return sig, nil
}
