package testcluster

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections on a loopback port to a target, until Blackhole: from then
// on the connections open at that moment carry nothing either way and stay open, with no FIN
// and no RST, as after a dropped route or a firewall that forgot them; connections opened
// later are forwarded as before. Everything stops when the test ends.
type Proxy struct {
	Addr   string
	target string
	ln     net.Listener
	gen    atomic.Int64 // connections of a generation below it are black-holed
	cut    atomic.Bool  // new connections are closed at once
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

// StartProxy listens on a free loopback port and forwards to target.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Blackhole silences every connection open now.
func (p *Proxy) Blackhole() { p.gen.Add(1) }

// Cut silences every connection open now and closes every new one at once, until Restore: a
// client cut off from its target.
func (p *Proxy) Cut() { p.cut.Store(true); p.gen.Add(1) }

// Restore forwards new connections again after Cut.
func (p *Proxy) Restore() { p.cut.Store(false) }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.cut.Load() {
			_ = in.Close()
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		gen := p.gen.Load()
		p.wg.Add(2)
		go p.pipe(out, in, gen)
		go p.pipe(in, out, gen)
	}
}

// pipe copies src to dst while the connection's generation is current, then reads and drops
// what comes, so that the sender sees nothing wrong and the receiver gets nothing.
func (p *Proxy) pipe(dst io.Writer, src io.Reader, gen int64) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && p.gen.Load() == gen {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
