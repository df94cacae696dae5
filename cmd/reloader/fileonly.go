//go:build configwave_fileonly

package main

// The file-only build: the reloader without the API client, for the launches that read
// mounted folders (configmap-reload's and prometheus-config-reloader's). It is the same
// program with the API source left out, so that its idle memory is that of the folder watch
// alone; a launch that needs the API stops at the flag check (checkBuild) and names the full
// build.

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/reloader/reload"
)

// fileOnly is true: this build reads mounted folders only.
const fileOnly = true

// handOver replaces this process with the full build when the launch serves a web config
// file that configures something (prometheus-config-reloader's --web-config-file: TLS and basic
// auth), which this build leaves out with its YAML and bcrypt. The Prometheus Operator starts
// its sidecar at the image's /bin/prometheus-config-reloader, which leads here; the full build
// is beside it. Where it is not, or cannot start, the launch stops: the endpoints are never
// served in the clear when the file asks for TLS or auth.
func handOver(cfg *config, argv0 string, args []string) error {
	toFullBuild = func() error { return execFullBuild(argv0, args) }
	if !servesWebConfig(cfg) {
		return nil
	}
	return toFullBuild()
}

// toFullBuild hands this launch over to the full build (handOver sets it); it returns only
// when it could not.
var toFullBuild = func() error { return errors.New("no launch to hand over") }

func execFullBuild(argv0 string, args []string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--web-config-file needs the full build of the reloader, %s in the image: %w", fullBuildPath, err)
	}
	full := filepath.Join(filepath.Dir(exe), filepath.Base(fullBuildPath))
	err = execBuild(full, argv0, args)
	return fmt.Errorf("--web-config-file needs the full build of the reloader, which serves TLS and basic auth; this file-only build could not start it at %s: %w; run %s", full, err, fullBuildPath)
}

// checkWebConfig has nothing to check: a file that configures anything is the full build's,
// which the launch is handed over to (handOver), and an empty one means plain HTTP.
func checkWebConfig(string) error { return nil }

// webConfigServe serves plain HTTP while the web config file at path stays empty, and looks at
// it before every request, as the full build reads it for every request: once it configures
// anything (the Prometheus Operator's Secret got TLS or basic auth), this process hands over
// to the full build, and until it has, every request is refused with 503.
func webConfigServe(path string) func(net.Listener, *http.Server) error {
	return func(ln net.Listener, srv *http.Server) error {
		next := srv.Handler
		if next == nil {
			next = http.DefaultServeMux
		}
		srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if webConfigInUse(path) {
				klog.InfoS("the web config file configures the endpoints now; handing over to the full build", "file", path)
				err := toFullBuild()
				klog.ErrorS(err, "could not hand over to the full build; refusing every request rather than serving in the clear", "file", path)
				http.Error(w, "the web config changed and this file-only build cannot serve it: run "+fullBuildPath, http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
		return srv.Serve(ln)
	}
}

// checkAPISources has nothing to check: checkBuild refuses the API's flags first.
func (o *options) checkAPISources(*config) error { return nil }

// readAPI is never reached: checkBuild stops an API launch first.
func readAPI(*config, *reload.Reloader, *reload.Metrics, prometheus.Registerer) (runningSource, eventRecorder, error) {
	return nil, nil, errors.New("this file-only build reads no API: " + fullBuildPath + " does")
}

// rolloutConfig is all-at-once: --rollout=one-first needs the API, which this build leaves out.
type rolloutConfig struct{}

func (rolloutConfig) name() string { return rolloutAllAtOnce }
