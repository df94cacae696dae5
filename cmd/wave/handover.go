package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The image's entrypoint is wave. The Grafana chart runs its dashboard sidecar from
// sidecar.image with no command and no arguments, configured by k8s-sidecar's environment
// alone: pointed at our image, that container starts wave. wave hands such a start over to the
// reloader beside it, which reads that environment (cmd/reloader/peer_k8ssidecar.go).

// k8sSidecarStart reports whether wave was started as k8s-sidecar: no arguments, and its
// LABEL and FOLDER set (wave reads neither).
func k8sSidecarStart(args []string, getenv func(string) string) bool {
	return len(args) == 0 && strings.TrimSpace(getenv("LABEL")) != "" && strings.TrimSpace(getenv("FOLDER")) != ""
}

// handOverToReloader replaces this process with the reloader binary in wave's own folder. It
// returns only when that fails.
func handOverToReloader() error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find wave's own binary: %w", err)
	}
	reloader := filepath.Join(filepath.Dir(exe), "reloader")
	if err := syscall.Exec(reloader, []string{reloader}, os.Environ()); err != nil {
		return fmt.Errorf("run the reloader beside wave (%s): %w", reloader, err)
	}
	return nil
}
