// Package testdisk mounts small tmpfs folders so that tests can fill a disk or make it
// read-only for real, which a chmod cannot do for root (the tests run as root in CI).
//
//	root := testdisk.Tmpfs(t, "256k") // unmounted when the test ends
//	testdisk.ReadOnly(t, root, true)  // writes now fail with EROFS
//	testdisk.Resize(t, root, "2m")    // room again
package testdisk

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"golang.org/x/sys/unix"
)

// Tmpfs mounts a tmpfs of size bytes (rounded up to pages by the kernel) on a fresh folder and
// unmounts it when the test ends. It skips the test, saying why, where mounting is not allowed
// (no CAP_SYS_ADMIN).
func Tmpfs(t testing.TB, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("configwave-test", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+size+",mode=0755"); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skipf("mounting a tmpfs needs CAP_SYS_ADMIN, which this test process lacks: %v", err)
		}
		t.Fatalf("mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		// MNT_DETACH: a process the test started may still hold a file open in it.
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// ReadOnly remounts a Tmpfs folder read-only (true) or writable (false).
func ReadOnly(t testing.TB, dir string, ro bool) {
	t.Helper()
	flags := uintptr(unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
	if ro {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount("", dir, "", flags, ""); err != nil {
		t.Fatalf("remount %s (read-only %v): %v", dir, ro, err)
	}
}

// Resize remounts a Tmpfs folder with a new size; shrinking below what it holds fails.
func Resize(t testing.TB, dir, size string) {
	t.Helper()
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, "size="+size); err != nil {
		t.Fatalf("resize %s to %s: %v", dir, size, err)
	}
}

// Entries lists dir's names, sorted: after a failed write a config root must list exactly what
// it did before, with no half-made folder left.
func Entries(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(des))
	for _, de := range des {
		names = append(names, de.Name())
	}
	sort.Strings(names)
	return names
}
