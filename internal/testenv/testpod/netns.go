// Package testpod runs a pod's containers from the images the build made, as kubelet and its
// runtime would: the image copied out of its OCI layout by skopeo and unpacked by umoci, each
// container started by runc from the pod spec its chart or operator renders (command or
// entrypoint, args, env, user, read-only root, capabilities, volumes, the service-account
// token), in a network namespace of the pod's own that the test's apps share.
//
//	layout := testpod.Layout(t)
//	pod := testpod.New(t, "fluent-bit", spec)
//	pod.Volume("config", dir)
//	c := pod.Run(t, testpod.Unpack(t, layout, "reloader"), "reloader")
//
// It needs root, runc, umoci, skopeo and ip (iproute2); Need says so in one line, and under
// CI=true that is a failure.
package testpod

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

var netnsCount atomic.Int64

// Netns is a network namespace made for one pod: its own loopback, shared by the pod's
// containers and by the apps the test runs beside them, as the containers of one pod share it.
type Netns struct {
	Name string
	path string
}

// NewNetns makes a network namespace with its loopback up; it is removed when the test ends.
func NewNetns(t testing.TB) *Netns {
	t.Helper()
	n := &Netns{Name: fmt.Sprintf("cwpod-%d-%d", os.Getpid(), netnsCount.Add(1))}
	n.path = "/var/run/netns/" + n.Name
	if out, err := exec.Command("ip", "netns", "add", n.Name).CombinedOutput(); err != nil {
		t.Fatalf("make the pod's network namespace: ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", n.Name).CombinedOutput(); err != nil {
			t.Errorf("remove the pod's network namespace %s: %v: %s", n.Name, err, out)
		}
	})
	if out, err := exec.Command("ip", "-n", n.Name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("bring up the pod's loopback: %v: %s", err, out)
	}
	return n
}

// Path is the namespace's file, which a container's runtime config joins.
func (n *Netns) Path() string { return n.path }

// do runs f on an OS thread that has entered the namespace. A socket belongs to the namespace
// of the thread that made it, so listeners and connections made in f stay in the pod's network
// whichever thread serves them later.
func (n *Netns) do(f func()) error {
	runtime.LockOSThread()
	host, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open this thread's network namespace: %w", err)
	}
	defer unix.Close(host)
	pod, err := unix.Open(n.path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open %s: %w", n.path, err)
	}
	defer unix.Close(pod)
	if err := unix.Setns(pod, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter %s: %w", n.Name, err)
	}
	f()
	if err := unix.Setns(host, unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, so it ends with this goroutine, never serving another.
		return fmt.Errorf("leave %s: %w", n.Name, err)
	}
	runtime.UnlockOSThread()
	return nil
}

// Listen listens on addr in the pod's network.
func (n *Netns) Listen(addr string) (net.Listener, error) {
	var ln net.Listener
	var lerr error
	if err := n.do(func() { ln, lerr = net.Listen("tcp", addr) }); err != nil {
		return nil, err
	}
	return ln, lerr
}

// DialContext connects to addr in the pod's network.
func (n *Netns) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	var derr error
	if err := n.do(func() { c, derr = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr) }); err != nil {
		return nil, err
	}
	return c, derr
}

// Client is an HTTP client whose connections are made in the pod's network.
func (n *Netns) Client() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: n.DialContext, DisableKeepAlives: true}}
}

// Get requests http://addr/path in the pod's network and returns the status code and body; 0
// and the error's text when nothing answered.
func (n *Netns) Get(addr, path string) (int, string) {
	resp, err := n.Client().Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Bridge listens on addr in the pod's network and forwards each connection to target in the
// test's own network: how a pod reaches the test's API server, which listens on the test's
// loopback only. It stops when the test ends.
func (n *Netns) Bridge(t testing.TB, addr, target string) {
	t.Helper()
	ln, err := n.Listen(addr)
	if err != nil {
		t.Fatalf("listen on %s in the pod's network: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := net.DialTimeout("tcp", target, 5*time.Second)
				if err != nil {
					return
				}
				defer out.Close()
				go func() { _, _ = io.Copy(out, in); _ = out.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
}

// Exec runs a program of the test's machine in the pod's network: an app beside the pod's
// containers (a real Prometheus the sidecar tells), stopped when the test ends.
func (n *Netns) Exec(t testing.TB, bin string, args ...string) *testcluster.Process {
	t.Helper()
	return testcluster.StartProcess(t, "ip", nil, append([]string{"netns", "exec", n.Name, bin}, args...)...)
}
