// Package webconfig serves an endpoint as Prometheus' exporter-toolkit web config file says:
// TLS (with client certificates) and basic auth, or plain HTTP when the file is empty, as
// prometheus-config-reloader's --web-config-file does. It is the toolkit's own code, so a file
// the Prometheus Operator writes means here what it means there.
//
//	if err := webconfig.Check(path); err != nil { ... }
//	err := webconfig.Serve(path)(listener, server)
package webconfig

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"

	"github.com/go-logr/logr"
	"github.com/prometheus/exporter-toolkit/web"
	"k8s.io/klog/v2"
)

// Check reads the file once at start: a missing or malformed one stops the start, as it stops
// prometheus-config-reloader's.
func Check(path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("--web-config-file=%q: %w; mount the web config the Prometheus Operator renders (its Secret) there", path, err)
	}
	if err := web.Validate(path); err != nil {
		return fmt.Errorf("--web-config-file=%q: %w", path, err)
	}
	return nil
}

// Serve returns a function that serves server on a listener as the file at path says; the file
// is read again for every new connection, so a rotated certificate is used at once.
func Serve(path string) func(net.Listener, *http.Server) error {
	logger := slog.New(logr.ToSlogHandler(klog.Background().WithName("web")))
	return func(ln net.Listener, srv *http.Server) error {
		return web.Serve(ln, srv, &web.FlagConfig{WebConfigFile: &path}, logger)
	}
}
