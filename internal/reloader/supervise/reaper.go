//go:build linux

// Package supervise runs the app of subprocess mode as the reloader's child: it starts it,
// forwards the signals a container runtime sends, reaps every process that ends up the
// reloader's child (it is PID 1 in a container), and returns the app's exit code.
//
//	reaper, _ := supervise.NewReaper(true)
//	sup := supervise.New(reaper, []string{"nginx", "-g", "daemon off;"}, 25*time.Second)
//	child, _ := sup.Start()   // after the first config is on disk
//	err := sup.Run(ctx)       // an ExitError with the app's code when it ends
//
// Telling the app about a change is package notify's job (notify.Signal with the child).
package supervise

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	ossignal "os/signal"
	"sync"
	"syscall"

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
