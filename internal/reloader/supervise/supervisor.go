//go:build linux

package supervise

import (
	"context"
	"fmt"
	"os"
	ossignal "os/signal"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// ExitError ends the run group with the app's exit code, which the reloader then exits with.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("the app exited with code %d", e.Code) }

// Supervisor runs the app of subprocess mode: Start starts it (after the first unpack), and
// Run forwards the signals a container runtime sends until the app exits.
type Supervisor struct {
	reaper  *Reaper
	args    []string
	grace   time.Duration // how long the app may take to exit after a stop signal
	started chan *Child
}

// New returns a Supervisor for args, whose processes r reaps; grace is --shutdown-grace.
func New(r *Reaper, args []string, grace time.Duration) *Supervisor {
	return &Supervisor{reaper: r, args: args, grace: grace, started: make(chan *Child, 1)}
}

// Start starts the app. It is called once, from the loop, when the first config is on disk.
func (s *Supervisor) Start() (*Child, error) {
	c, err := StartChild(s.reaper, s.args)
	if err != nil {
		return nil, err
	}
	klog.InfoS("app started", "command", s.args[0], "pid", c.Pid())
	s.started <- c
	return c, nil
}

// forwarded are the signals relayed to the app. SIGHUP, USR1 and USR2 too, so that a manual
// `kill -HUP` of the container's PID 1 still reaches the app.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2}

// Run relays signals to the app until it exits, and returns an ExitError with its code. A stop
// signal (TERM, INT, QUIT) before the app started returns 128+signal at once. When ctx ends
// (another part of the reloader failed) the app is stopped as a runtime would stop it, TERM
// then KILL after the grace, and Run returns nil.
func (s *Supervisor) Run(ctx context.Context) error {
	sigs := make(chan os.Signal, 8)
	ossignal.Notify(sigs, forwarded...)
	defer ossignal.Stop(sigs)
	var child *Child
	var exited <-chan Exit
	var kill <-chan time.Time // armed by the first stop signal: an app that ignores it is killed
	for {
		select {
		case c := <-s.started:
			child, exited = c, c.Exited()
		case <-kill:
			klog.InfoS("the app did not exit within --shutdown-grace; killing it", "grace", s.grace, "pid", child.Pid())
			_ = child.Signal(syscall.SIGKILL)
			kill = nil
		case sig := <-sigs:
			if child == nil {
				if sig == syscall.SIGHUP || sig == syscall.SIGUSR1 || sig == syscall.SIGUSR2 {
					continue // nothing to reload yet
				}
				klog.InfoS("stopping before the app started", "signal", sig.String())
				return ExitError{Code: 128 + int(sig.(syscall.Signal))}
			}
			klog.V(2).InfoS("forwarding signal to the app", "signal", sig.String(), "pid", child.Pid())
			if err := child.Signal(sig); err != nil {
				klog.ErrorS(err, "could not forward a signal to the app", "signal", sig.String())
			}
			if kill == nil && (sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == syscall.SIGQUIT) {
				kill = time.After(s.grace)
			}
		case e := <-exited:
			return ExitError{Code: e.Code()}
		case <-ctx.Done():
			if child != nil {
				_ = child.Signal(syscall.SIGTERM)
				select {
				case <-exited:
				case <-time.After(s.grace):
					_ = child.Signal(syscall.SIGKILL)
					<-exited
				}
			}
			return nil
		}
	}
}
