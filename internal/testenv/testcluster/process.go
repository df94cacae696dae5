package testcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// process is one running component, its output in logDir/<name>.log.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has exited
	err  error         // exit status, valid after done
}

// spawnRequests is served by one goroutine locked to its OS thread for the life of the program.
// Children are started with Pdeathsig, which the kernel fires when the *thread* that forked them
// exits; starting every child from a thread that never exits means children die with the test
// binary (timeout, panic, SIGKILL) and never with some unrelated thread.
var (
	spawnRequests = make(chan func())
	spawnerOnce   sync.Once
)

func spawn(f func()) {
	spawnerOnce.Do(func() {
		go func() {
			runtime.LockOSThread()
			for f := range spawnRequests {
				f()
			}
		}()
	})
	spawnRequests <- f
}

func startProcess(logDir, name, binary string, args ...string) (*process, error) {
	return startProcessEnv(logDir, name, binary, nil, args...)
}

// startProcessEnv is startProcess with env added to (and overriding) the test's environment.
func startProcessEnv(logDir, name, binary string, env []string, args ...string) (*process, error) {
	log, err := os.OpenFile(filepath.Join(logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	fmt.Fprintf(log, "=== %s %s %q\n", time.Now().Format(time.RFC3339Nano), binary, args)
	cmd := exec.Command(binary, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true, // a terminal's Ctrl-C reaches us, not the components; we stop them in order
		Pdeathsig: syscall.SIGKILL,
	}
	errc := make(chan error, 1)
	spawn(func() { errc <- cmd.Start() })
	if err := <-errc; err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, and SIGKILL if it has not exited after grace.
func (p *process) stop(grace time.Duration) {
	if p == nil || p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

// kill ends the process group at once, as a crash or an OOM kill would.
func (p *process) kill() {
	if p == nil || p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

func (p *process) exitError() error {
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return fmt.Errorf("%s exited: %s", p.name, exit.ProcessState)
	}
	if p.err != nil {
		return fmt.Errorf("%s: %w", p.name, p.err)
	}
	return fmt.Errorf("%s exited with status 0", p.name)
}
