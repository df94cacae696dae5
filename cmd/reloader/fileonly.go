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

	"github.com/configwave/configwave/internal/reloader/reload"
)

// fileOnly is true: this build reads mounted folders only.
const fileOnly = true

// handOver replaces this process with the full build when the launch serves a web config
// file (prometheus-config-reloader's --web-config-file: TLS and basic auth), which this build
// leaves out with its YAML and bcrypt. The Prometheus Operator starts its sidecar at the
// image's /bin/prometheus-config-reloader, which leads here; the full build is beside it.
// Where it is not, or cannot start, the launch stops: the endpoints are never served in the
// clear when the file asks for TLS or auth.
func handOver(cfg *config, argv0 string, args []string) error {
	if !servesWebConfig(cfg) {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--web-config-file needs the full build of the reloader, %s in the image: %w", fullBuildPath, err)
	}
	full := filepath.Join(filepath.Dir(exe), filepath.Base(fullBuildPath))
	err = execBuild(full, argv0, args)
	return fmt.Errorf("--web-config-file needs the full build of the reloader, which serves TLS and basic auth; this file-only build could not start it at %s: %w; run %s", full, err, fullBuildPath)
}

// checkWebConfig leaves the web config file to the full build, which the launch is handed
// over to (handOver).
func checkWebConfig(string) error { return nil }

// webConfigServe is never reached (handOver); were it, the endpoints would not start.
func webConfigServe(string) func(net.Listener, *http.Server) error {
	return func(net.Listener, *http.Server) error {
		return errors.New("this file-only build serves no web config file: run " + fullBuildPath)
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
