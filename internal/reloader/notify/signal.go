package notify

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Process is a process that can be signalled: the child the reloader supervises, or an app
// found by name in a shared PID namespace.
type Process interface {
	Signal(sig os.Signal) error
	Pid() int
}

// Signal sends Sig to a process on every reload, never before NotBefore.
//
// Why NotBefore: most programs die of a SIGHUP that arrives before they install a handler, so
// a change that lands while the app is still starting would kill it instead of reloading it.
type Signal struct {
	Process   Process
	Sig       syscall.Signal
	NotBefore time.Time
}

// Notify sends the signal, after waiting until NotBefore.
func (s *Signal) Notify(ctx context.Context) error {
	if wait := time.Until(s.NotBefore); wait > 0 {
		klog.V(2).InfoS("app started moments ago; holding the reload signal until its startup grace is over", "wait", wait)
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := s.Process.Signal(s.Sig); err != nil {
		return fmt.Errorf("send %s to the app (pid %d): %w", unix.SignalName(s.Sig), s.Process.Pid(), err)
	}
	return nil
}

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
