package supervise

import (
	"os"
	ossignal "os/signal"

	"golang.org/x/sys/unix"
)

func signalNotify(c chan os.Signal, sigs ...os.Signal) { ossignal.Notify(c, sigs...) }

func unixPrctlSubreaper(v uintptr) error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, v, 0, 0, 0) }
