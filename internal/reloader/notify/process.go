package notify

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// NamedProcess signals a process the reloader did not start: the app in another container of
// a pod with shareProcessNamespace: true, found by its command name on every reload (the app
// may have been restarted since the last one and have a new pid).
//
// A program that forks workers under the same name (nginx, Apache, PostgreSQL) is found by its
// top process: a match whose parent is not a match. Exactly one is required; the signal never
// goes to a guess.
type NamedProcess struct {
	Name string
	Sig  syscall.Signal
	Proc string // the proc file system; default /proc
}

// Notify finds the process and sends it the signal.
func (n *NamedProcess) Notify(context.Context) error {
	pid, err := n.Find()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, n.Sig); err != nil {
		return fmt.Errorf("send %s to %q (pid %d): %w", unix.SignalName(n.Sig), n.Name, pid, err)
	}
	return nil
}

// Find returns the pid of the one top process named Name.
func (n *NamedProcess) Find() (int, error) {
	proc := n.Proc
	if proc == "" {
		proc = "/proc"
	}
	entries, err := os.ReadDir(proc)
	if err != nil {
		return 0, fmt.Errorf("--reload-process=%s: list processes: %w", n.Name, err)
	}
	parent := map[int]int{} // matching pid → its parent
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		name, ppid, ok := readStat(filepath.Join(proc, e.Name()))
		if !ok {
			continue // gone meanwhile, or not ours to read
		}
		if name == n.Name || argv0(filepath.Join(proc, e.Name())) == n.Name {
			parent[pid] = ppid
		}
	}
	var tops []int
	for pid, ppid := range parent {
		if _, forked := parent[ppid]; !forked {
			tops = append(tops, pid)
		}
	}
	sort.Ints(tops)
	switch len(tops) {
	case 1:
		return tops[0], nil
	case 0:
		return 0, fmt.Errorf("--reload-process=%s: no process of that name; is it running, and does the pod set shareProcessNamespace: true?", n.Name)
	default:
		return 0, fmt.Errorf("--reload-process=%s: %d processes of that name (pids %s) that are not one's workers; the signal goes to exactly one: give a name only the app has", n.Name, len(tops), joinInts(tops))
	}
}

// readStat returns a process's command name (the kernel's comm, at most 15 bytes) and parent.
func readStat(dir string) (name string, ppid int, ok bool) {
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses, so cut at the last ')'.
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	fields := strings.Fields(s[end+1:])
	if len(fields) < 2 {
		return "", 0, false
	}
	ppid, err = strconv.Atoi(fields[1])
	return s[open+1 : end], ppid, err == nil
}

// argv0 is the base name of a process's first argument, for names longer than comm holds.
func argv0(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil || len(b) == 0 {
		return ""
	}
	first, _, _ := strings.Cut(string(b), "\x00")
	return filepath.Base(first)
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
