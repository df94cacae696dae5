// Package profiles serves Go's runtime profiles (/debug/pprof/...) on an address of their
// own, for Stakater Reloader's --enable-pprof and --pprof-addr. It is a package apart from
// serve because importing net/http/pprof links it into every binary that imports the package,
// and the reloader sidecar has no use for it.
package profiles

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// Server serves the profiles.
type Server struct {
	ln  net.Listener
	srv *http.Server
}

// Listen binds addr. The command line (/debug/pprof/cmdline) is left out: it may hold a
// webhook URL with its token.
func Listen(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on --pprof-addr=%s: %w (pick a free port)", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/debug/pprof/cmdline" {
			http.NotFound(w, r)
			return
		}
		pprof.Index(w, r)
	})
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// A CPU profile or trace takes ?seconds=N to write; the write timeout must let it.
	return &Server{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}, nil
}

// Addr is the address actually bound.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Run serves until Stop.
func (s *Server) Run() error {
	if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve profiles on %s: %w", s.Addr(), err)
	}
	return nil
}

// Stop ends Run; a profile being written is cut short.
func (s *Server) Stop(error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	_ = s.srv.Close()
}
