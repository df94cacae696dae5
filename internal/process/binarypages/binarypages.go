// Package binarypages keeps a long-running process's resident set to the pages of its own
// program that it still runs. A static Go binary's start-up runs code and reads tables all over
// the file (every package's init, flag parsing, the first unpack), and the kernel maps the
// 64 KiB around each page it faults in, so an idle sidecar counts most of its binary in its RSS
// although its idle loop touches a fraction of it. Release drops the process's mappings of the
// read-only pages of its executable: the pages stay in the page cache, shared by every process
// of the same image on the node, and what the process runs again comes back as a minor fault.
package binarypages

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Region is one mapping of the executable.
type Region struct {
	Start, End uintptr
	Perms      string
}

// File names the executable as smaps may show it: its device (major:minor, in hex) and inode,
// or its path. A container's overlay file shows in smaps with the device and inode of the
// layer's file on some kernels, while stat gives the overlay's; the path is the same.
type File struct {
	Dev   string
	Inode uint64
	Path  string
}

// ReadOnlyRegions picks, from /proc/PID/smaps, the private read-only mappings of file that
// smaps shows holding none of the process's own pages, resident or swapped out: code,
// read-only data and the function tables. A writable mapping (the data segment) holds what the
// program wrote, and so does a read-only one with anonymous pages (a dynamic loader's
// relocations, made read-only after, or a debugger's breakpoints): dropping either would lose
// them, so neither is ever among them, nor is a mapping whose counts smaps does not show.
func ReadOnlyRegions(smaps io.Reader, file File) ([]Region, error) {
	var out []Region
	var cur *Region
	var anonZero, swapZero bool
	keep := func() {
		if cur != nil && anonZero && swapZero {
			out = append(out, *cur)
		}
		cur, anonZero, swapZero = nil, false, false
	}
	s := bufio.NewScanner(smaps)
	for s.Scan() {
		f := strings.Fields(s.Text())
		switch {
		case len(f) == 0:
		case !strings.HasSuffix(f[0], ":"): // a mapping's first line: range perms offset dev inode [path]
			keep()
			cur = mapping(f, file)
		case f[0] == "Anonymous:":
			anonZero = len(f) >= 2 && f[1] == "0"
		case f[0] == "Swap:":
			swapZero = len(f) >= 2 && f[1] == "0"
		}
	}
	keep()
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("read the process's mappings: %w", err)
	}
	return out, nil
}

// mapping is the region of a smaps header line when it maps file private and read-only.
func mapping(f []string, file File) *Region {
	if len(f) < 6 {
		return nil // anonymous
	}
	perms := f[1]
	n, err := strconv.ParseUint(f[4], 10, 64)
	same := err == nil && n == file.Inode && f[3] == file.Dev
	if path := strings.Join(f[5:], " "); file.Path != "" && path == file.Path {
		same = true
	}
	if !same || len(perms) != 4 || perms[0] != 'r' || perms[1] != '-' || perms[3] != 'p' {
		return nil
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return nil
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return nil
	}
	return &Region{Start: uintptr(start), End: uintptr(end), Perms: perms}
}

// Release drops this process's mappings of its executable's read-only pages and says how many
// bytes of mappings it dropped. It changes no content: those mappings are private and were
// never written, so a page dropped is the file's page, read back from the page cache when
// touched.
func Release() (int, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		return 0, fmt.Errorf("find this program's file: %w", err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("read this process's mappings: %w", err)
	}
	exe := File{Dev: fmt.Sprintf("%02x:%02x", unix.Major(st.Dev), unix.Minor(st.Dev)), Inode: st.Ino}
	exe.Path, _ = os.Readlink("/proc/self/exe")
	regions, err := ReadOnlyRegions(f, exe)
	f.Close()
	if err != nil {
		return 0, err
	}
	released := 0
	for _, r := range regions {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r.Start, r.End-r.Start, unix.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("drop the mapping %x-%x (%s) of this program: %w", r.Start, r.End, r.Perms, errno)
		}
		released += int(r.End - r.Start)
	}
	return released, nil
}

// Run releases the program's pages once ready says start-up is done and after more than
// settle, then every period until ctx ends, so that a burst of work (a reload, the first
// scrapes) does not stay resident either. A release that fails is said at -v=2 and the process
// runs on: the pages are only counted, never lost.
func Run(ctx context.Context, ready func() bool, settle, period time.Duration) {
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for !ready() {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		}
	}
	wait := settle
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = period
		n, err := Release()
		if err != nil {
			klog.V(2).InfoS("could not release the program's pages; running on", "err", err.Error())
			continue
		}
		klog.V(4).InfoS("released the program's pages", "mappedBytes", n)
	}
}
