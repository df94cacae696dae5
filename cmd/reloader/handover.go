package main

// The image holds two builds of the reloader: the full one (/reloader) and the file-only one
// (/reloader-fileonly, where the peers' program paths lead). Each hands a launch the other
// serves better over at start (handOver, in api.go and fileonly.go), with one exec before
// anything runs.

import (
	"os"
	"syscall"
)

// servesWebConfig says whether the endpoints are served as a web config file says, which
// only the full build can.
func servesWebConfig(cfg *config) bool { return cfg.peer.webConfigFile != "" && cfg.listen != "" }

// execBuild replaces this process with the build at path, with the same command line and
// environment. It returns only when the exec failed.
func execBuild(path, argv0 string, args []string) error {
	return syscall.Exec(path, append([]string{argv0}, args...), os.Environ())
}
