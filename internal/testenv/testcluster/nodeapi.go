package testcluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// The cluster's Service range, and the ClusterIP of the kubernetes Service in it (its first
// address), which kubelet gives every pod as KUBERNETES_SERVICE_HOST. Private, and beside the
// pods' own range, so it takes nothing from a network the host is on.
const (
	serviceCIDR  = "10.244.79.0/24"
	APIServiceIP = "10.244.79.1"
)

// apiRelay makes the API server reachable from the node's pods as it is in users' clusters,
// through the kubernetes Service, with no change to their pod specs (a chart's, as rendered).
// The API server listens on loopback only and no kube-proxy runs here, so the Service's
// ClusterIP is an address of an interface of the node's own, and this relay passes every
// connection to it on to the API server: TLS end to end, the serving certificate names the
// ClusterIP. Pods on the node's bridge reach it through their route to the Service range (via
// the bridge's address, the host's), hostNetwork pods directly; nothing leaves the host.
type apiRelay struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	cut   map[string]bool // pod addresses cut off from the API server (CutAPI)
}

// relayAPI puts the Service's ClusterIP on an interface of its own, recorded before it is made
// so that a stop (or the next start after a killed run) removes it, and starts the relay.
func (n *Node) relayAPI(apiAddr string) error {
	name := n.host.Bridge + "s"
	n.host.Service = name
	if err := n.host.save(); err != nil {
		return err
	}
	for _, args := range [][]string{{"link", "add", name, "type", "bridge"}, {"addr", "add", APIServiceIP + "/32", "dev", name}, {"link", "set", name, "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("the kubernetes Service's address for the node's pods: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(APIServiceIP, "443"))
	if err != nil {
		return fmt.Errorf("relay the kubernetes Service to the API server: %w", err)
	}
	n.relay = startRelay(ln, apiAddr)
	return nil
}

func startRelay(ln net.Listener, apiAddr string) *apiRelay {
	r := &apiRelay{ln: ln, conns: map[net.Conn]struct{}{}, cut: map[string]bool{}}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed at stop
			}
			r.wg.Add(1)
			go func() { defer r.wg.Done(); r.pass(c, apiAddr) }()
		}
	}()
	return r
}

// CutAPI cuts the pod of address ip off from the API server, as a partition between that one
// pod and the control plane would, while every other pod keeps its access: the relay closes
// the pod's open connections (its watches) and every new one as it comes, until the returned
// restore is called or the test ends. The pods of a Deployment share one ServiceAccount and
// one route, so neither RBAC nor a route can cut one of them alone.
func (n *Node) CutAPI(t testing.TB, ip string) (restore func()) {
	t.Helper()
	restore = n.relay.cutOff(ip)
	t.Cleanup(restore)
	return restore
}

// cutOff closes ip's connections and refuses its new ones until the returned func is called.
func (r *apiRelay) cutOff(ip string) (restore func()) {
	r.mu.Lock()
	r.cut[ip] = true
	for c := range r.conns {
		if remoteIP(c) == ip {
			c.Close() // its pass closes the upstream half
		}
	}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.cut, ip)
	}
}

func remoteIP(c net.Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return ""
	}
	return host
}

// pass copies both ways between a pod's connection and a new one to the API server.
func (r *apiRelay) pass(c net.Conn, apiAddr string) {
	up, err := net.Dial("tcp", apiAddr)
	if err != nil {
		c.Close()
		return
	}
	if !r.track(c, up) {
		return
	}
	defer r.untrack(c, up)
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go copyHalf(up, c)
	go copyHalf(c, up)
	<-done
	<-done
}

func (r *apiRelay) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil || r.cut[remoteIP(cs[0])] { // stopped meanwhile, or the pod cut off
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		r.conns[c] = struct{}{}
	}
	return true
}

func (r *apiRelay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(r.conns, c)
	}
}

// stop closes the listener and every connection (watches included), and waits for the relay's
// goroutines.
func (r *apiRelay) stop() error {
	err := r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
	r.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
