// Package serve runs the operational HTTP endpoints both binaries expose: /healthz, /readyz
// and /metrics, and /status where a binary has one.
//
//	s, err := serve.Listen(":9533", reg, serve.Checks{Ready: r.Ready})
//	g.Add(s.Run, s.Stop)
package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server is a listening endpoint server.
type Server struct {
	ln    net.Listener
	srv   *http.Server
	serve func(net.Listener, *http.Server) error // nil: plain HTTP
}

// Checks decide what the endpoints answer; a nil field means always fine, or no /status.
type Checks struct {
	Ready   func() bool  // /readyz
	Healthy func() error // /healthz; the error's text is the answer's body
	Status  func() any   // /status, served as JSON; it must hold no secret value
	// MetricsPath is where the metrics are served; default /metrics.
	MetricsPath string
	// HealthPaths are more paths that answer as /healthz does (Stakater Reloader's /live).
	HealthPaths []string
	// Flag names the address in errors; default --listen-address.
	Flag string
	// ReadyDetail, when set, is added to /readyz's answer: what is ready only in part.
	ReadyDetail func() string
	// Serve, when set, serves on the listener instead of plain HTTP (TLS and authentication
	// as a peer's web config says).
	Serve func(net.Listener, *http.Server) error
}

// Listen binds addr (":0" picks a free port) and prepares the handlers.
func Listen(addr string, gatherer prometheus.Gatherer, c Checks) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		flag := c.Flag
		if flag == "" {
			flag = "--listen-address"
		}
		return nil, fmt.Errorf("listen on %s=%s: %w (pick a free port, or pass an empty value to disable)", flag, addr, err)
	}
	mux := http.NewServeMux()
	healthz := func(w http.ResponseWriter, _ *http.Request) {
		if c.Healthy != nil {
			if err := c.Healthy(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ok\n"))
	}
	for _, p := range append([]string{"/healthz"}, c.HealthPaths...) {
		mux.HandleFunc(p, healthz)
	}
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		detail := ""
		if c.ReadyDetail != nil {
			if d := c.ReadyDetail(); d != "" {
				detail = d + "\n"
			}
		}
		if c.Ready != nil && !c.Ready() {
			http.Error(w, "not ready\n"+detail, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n" + detail))
	})
	if c.Status != nil {
		mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			_ = enc.Encode(c.Status())
		})
	}
	metricsPath := c.MetricsPath
	if metricsPath == "" {
		metricsPath = "/metrics"
	}
	mux.Handle(metricsPath, promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	s := New(ln, mux)
	s.serve = c.Serve
	return s, nil
}

// New serves h on a listener already bound, for endpoints kept apart from Listen's.
func New(ln net.Listener, h http.Handler) *Server {
	return &Server{ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
}

// Bound limits what one client may hold: the time to send its headers and its whole request,
// to read the answer, an idle keep-alive connection's life, and its headers' size. For a port
// that anyone who can route to it reaches (a webhook): set before Run.
func (s *Server) Bound(readHeader, read, write, idle time.Duration, maxHeaderBytes int) {
	s.srv.ReadHeaderTimeout, s.srv.ReadTimeout, s.srv.WriteTimeout, s.srv.IdleTimeout = readHeader, read, write, idle
	s.srv.MaxHeaderBytes = maxHeaderBytes
}

// Addr is the address actually bound.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Run serves until Stop.
func (s *Server) Run() error {
	serve := func(ln net.Listener, srv *http.Server) error { return srv.Serve(ln) }
	if s.serve != nil {
		serve = s.serve
	}
	if err := serve(s.ln, s.srv); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", s.Addr(), err)
	}
	return nil
}

// Stop ends Run, letting requests in flight finish for up to 5 s.
func (s *Server) Stop(error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

// NewRegistry returns a registry with the Go runtime and process collectors (RSS, file
// descriptors), as Kubernetes components expose them, and configwave_build_info: always 1,
// labelled with the binary, its version and the Go version it was built with, so that a
// dashboard shows which version runs where.
func NewRegistry(binary, version string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "configwave_build_info",
		Help:        "Always 1; the labels say which binary and version run, built with which Go.",
		ConstLabels: prometheus.Labels{"binary": binary, "version": version, "goversion": runtime.Version()},
	})
	info.Set(1)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), info)
	return reg
}
