// Package webconfig serves an endpoint as Prometheus' exporter-toolkit web config file says:
// TLS (with client certificates) and basic auth, or plain HTTP when the file configures no TLS,
// as prometheus-config-reloader's --web-config-file does. A file the Prometheus Operator writes
// must mean here what it means there, so this follows the toolkit's web package (v0.20) rule by
// rule, and its tests hold it to the toolkit itself: every file of the toolkit's own test data
// is accepted or refused by both alike, and both servers answer a matrix of requests alike.
// Where the toolkit has a security defect, this deliberately differs, and the tests name each
// difference (differences_test.go): client_allowed_sans is refused unless client certificates are
// verified against the file's client CA, and is checked without a panic on every connection,
// resumed ones too; an unknown user's password is compared at the users' bcrypt cost; wrong
// logins cannot evict a right one from the login cache.
//
// Why not the toolkit's package itself: it links the Prometheus common config (HTTP client
// config, OAuth2), text/template (which keeps every exported method of the binary), systemd
// activation and vsock, none of which a sidecar uses: 3.3 MB of the reloader's binary and
// 2.3 MiB of its idle RSS.
//
//	if err := webconfig.Check(path); err != nil { ... }
//	err := webconfig.Serve(path)(listener, server)
package webconfig

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"

	"golang.org/x/time/rate"
	"k8s.io/klog/v2"
)

// Check reads the file once at start: a missing or malformed one stops the start, as it stops
// prometheus-config-reloader's.
func Check(path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("--web-config-file=%q: %w; mount the web config the Prometheus Operator renders (its Secret) there", path, err)
	}
	if err := validate(path); err != nil {
		return fmt.Errorf("--web-config-file=%q: %w", path, err)
	}
	return nil
}

// validate is the toolkit's Validate: the users' password hashes, the file, and the TLS
// settings with the files they name.
func validate(path string) error {
	c, err := load(path)
	if err != nil {
		return err
	}
	if err := c.checkUsers(); err != nil {
		return err
	}
	if _, err := c.TLS.tlsConfig(); err != nil && !errors.Is(err, errNoTLS) {
		return err
	}
	return nil
}

// Serve returns a function that serves server on a listener as the file at path says. The file
// is read again for every request (its users and headers) and every new TLS connection (its
// certificates), so a rotated certificate or a changed password is used at once.
func Serve(path string) func(net.Listener, *http.Server) error {
	return func(ln net.Listener, srv *http.Server) error {
		addr := ln.Addr().String()
		c, err := load(path)
		if err != nil {
			return fmt.Errorf("--web-config-file=%q: %w", path, err)
		}
		if err := c.checkUsers(); err != nil {
			return fmt.Errorf("--web-config-file=%q: %w", path, err)
		}
		next := srv.Handler
		if next == nil {
			next = http.DefaultServeMux
		}
		h := newHandler(path, next)
		if c.RateLimit.Interval != 0 {
			h.limiter = rate.NewLimiter(rate.Every(c.RateLimit.Interval), c.RateLimit.Burst)
			klog.InfoS("rate limit on the web endpoints", "burst", c.RateLimit.Burst, "interval", c.RateLimit.Interval)
		}
		srv.Handler = h

		cfg, err := c.TLS.tlsConfig()
		switch {
		case errors.Is(err, errNoTLS):
			klog.InfoS("TLS is disabled", "http2", false, "address", addr)
			return srv.Serve(ln)
		case err != nil:
			return fmt.Errorf("--web-config-file=%q: %w", path, err)
		}
		if !c.HTTP.HTTP2 {
			srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
		}
		klog.InfoS("TLS is enabled", "http2", c.HTTP.HTTP2, "address", addr)
		srv.TLSConfig = cfg
		http2 := c.HTTP.HTTP2
		cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := load(path)
			if err != nil {
				return nil, fmt.Errorf("--web-config-file=%q: %w", path, err)
			}
			cfg, err := c.TLS.tlsConfig()
			if err != nil {
				return nil, fmt.Errorf("--web-config-file=%q: %w", path, err)
			}
			cfg.NextProtos = nextProtos(srv, http2)
			return cfg, nil
		}
		return srv.ServeTLS(ln, "", "")
	}
}

// nextProtos keeps the server's ALPN choice on the TLS config read for each connection:
// ServeTLS sets the protocols on a clone of srv.TLSConfig, which that config replaces. HTTP/2 is
// offered only where the file allows it and the server has a handler for it.
func nextProtos(srv *http.Server, http2Allowed bool) []string {
	http1 := true
	http2 := http2Allowed && srv.TLSNextProto["h2"] != nil
	if srv.Protocols != nil {
		http1 = srv.Protocols.HTTP1()
		http2 = http2 && srv.Protocols.HTTP2()
	}
	protos := slices.Clone(srv.TLSConfig.NextProtos)
	protos = slices.DeleteFunc(protos, func(p string) bool {
		return (p == "h2" && !http2) || (p == "http/1.1" && !http1)
	})
	if http2 && !slices.Contains(protos, "h2") {
		protos = append(protos, "h2")
	}
	if http1 && !slices.Contains(protos, "http/1.1") {
		protos = append(protos, "http/1.1")
	}
	return protos
}
