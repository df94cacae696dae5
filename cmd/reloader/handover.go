package main

// The image holds two builds of the reloader: the full one (/reloader) and the file-only one
// (/reloader-fileonly, where the peers' program paths lead). Each hands a launch the other
// serves better over at start (handOver, in api.go and fileonly.go), with one exec before
// anything runs.

import (
	"bytes"
	"os"
	"syscall"
)

// servesWebConfig says whether the endpoints are served as a web config file says (TLS, basic
// auth), which only the full build can. An empty file means plain HTTP, and the Prometheus
// Operator passes one to every sidecar whose Prometheus sets no TLS or auth: those stay in the
// file-only build, which hands over the moment the file gets content (webConfigServe). A file
// that cannot be read goes to the full build, whose check says what is wrong.
func servesWebConfig(cfg *config) bool {
	if cfg.peer.webConfigFile == "" || cfg.listen == "" {
		return false
	}
	return webConfigInUse(cfg.peer.webConfigFile)
}

// webConfigInUse says whether the web config file at path configures anything: it cannot be
// read, or holds more than white space.
func webConfigInUse(path string) bool {
	b, err := os.ReadFile(path)
	return err != nil || len(bytes.TrimSpace(b)) > 0
}

// execBuild replaces this process with the build at path, with the same command line and
// environment. It returns only when the exec failed.
func execBuild(path, argv0 string, args []string) error {
	return syscall.Exec(path, append([]string{argv0}, args...), os.Environ())
}
