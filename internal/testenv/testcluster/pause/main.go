// Command pause is PID 1 of the real node's pod sandboxes: it sleeps until SIGINT or SIGTERM and
// reaps the orphans it inherits. The node runs it from an image built at test time, so no
// registry is needed.
//
// With $SIGNAL_LOG set it is also a test's child process: it appends "start" to that file, then
// "hup:<content of $CONFIG_FILE>" on every SIGHUP and "term" on SIGTERM before it exits. With
// $EXIT_CODE set it exits at once with that code: an app its config keeps from starting.
package main

import (
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

func main() {
	if code := os.Getenv("EXIT_CODE"); code != "" {
		n, _ := strconv.Atoi(code)
		os.Exit(n)
	}
	logFile := os.Getenv("SIGNAL_LOG")
	record := func(what string) {
		if logFile == "" {
			return
		}
		f, err := os.OpenFile(logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o666)
		if err != nil {
			os.Exit(100)
		}
		_, _ = f.WriteString(what + "\n")
		_ = f.Close()
	}
	sig := make(chan os.Signal, 4)
	signals := []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD}
	if logFile != "" {
		signals = append(signals, syscall.SIGHUP)
	}
	signal.Notify(sig, signals...)
	record("start")
	for s := range sig {
		switch s {
		case syscall.SIGHUP:
			b, _ := os.ReadFile(os.Getenv("CONFIG_FILE"))
			record("hup:" + string(b))
		case syscall.SIGCHLD:
			for {
				var ws syscall.WaitStatus
				if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
					break
				}
			}
		default:
			if s == syscall.SIGTERM {
				record("term")
			}
			os.Exit(0)
		}
	}
}
