package unpack_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/reloader/unpack"
	"github.com/configwave/configwave/internal/testenv/testdisk"
)

func liveFolder(t *testing.T, root string) string {
	t.Helper()
	target, err := os.Readlink(filepath.Join(root, "..data"))
	require.NoError(t, err)
	return target
}

func TestFullDisk(t *testing.T) {
	root := testdisk.Tmpfs(t, "64k")
	w := unpack.New(root)
	v1 := map[string]unpack.File{"app.conf": file("v1"), "sub/extra": file("e1")}
	_, err := w.Write(v1)
	require.NoError(t, err)
	before := testdisk.Entries(t, root)

	big := map[string]unpack.File{"app.conf": file("v2"), "sub/extra": file(strings.Repeat("x", 200<<10))}
	_, err = w.Write(big)
	require.Error(t, err)
	assert.ErrorContains(t, err, "no space left on device")
	assert.ErrorContains(t, err, "needs 204802 bytes")
	assert.ErrorContains(t, err, "enlarge the volume under "+root)
	assert.Equal(t, "v1", read(t, root, "app.conf"), "the last good set stays readable")
	assert.Equal(t, "e1", read(t, root, "sub/extra"))
	assert.Equal(t, before, testdisk.Entries(t, root), "no partial folder or link is left")

	testdisk.Resize(t, root, "1m")
	changed, err := w.Write(big)
	require.NoError(t, err, "the same set goes in once there is room")
	assert.True(t, changed)
	assert.Equal(t, "v2", read(t, root, "app.conf"))
}

func TestReadOnlyRoot(t *testing.T) {
	root := testdisk.Tmpfs(t, "1m")
	w := unpack.New(root)
	_, err := w.Write(map[string]unpack.File{"app.conf": file("v1")})
	require.NoError(t, err)
	before := testdisk.Entries(t, root)

	testdisk.ReadOnly(t, root, true)
	_, err = w.Write(map[string]unpack.File{"app.conf": file("v2")})
	require.Error(t, err)
	assert.ErrorContains(t, err, "read-only file system")
	assert.ErrorContains(t, err, root+" is mounted read-only; the reloader's volumeMount must be writable")
	assert.Equal(t, "v1", read(t, root, "app.conf"))
	assert.Equal(t, before, testdisk.Entries(t, root))

	testdisk.ReadOnly(t, root, false)
	changed, err := w.Write(map[string]unpack.File{"app.conf": file("v2")})
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, "v2", read(t, root, "app.conf"))
}

func TestNameReplacedByTheApp(t *testing.T) {
	t.Run("a file replaced by a folder stops the write and keeps the last set", func(t *testing.T) {
		root := t.TempDir()
		w := unpack.New(root)
		_, err := w.Write(map[string]unpack.File{"app.conf": file("v1"), "other": file("o1")})
		require.NoError(t, err)
		require.NoError(t, os.Remove(filepath.Join(root, "app.conf")))
		require.NoError(t, os.Mkdir(filepath.Join(root, "app.conf"), 0o755))
		before := testdisk.Entries(t, root)

		_, err = w.Write(map[string]unpack.File{"app.conf": file("v2"), "other": file("o2")})
		require.EqualError(t, err, "app.conf under "+root+" is a folder that configwave did not write; move it away or choose another --configroot")
		assert.Equal(t, "o1", read(t, root, "other"), "all or nothing: the other file keeps the last set")
		assert.DirExists(t, filepath.Join(root, "app.conf"), "the app's folder is never removed")
		assert.Equal(t, before, testdisk.Entries(t, root))

		require.NoError(t, os.Remove(filepath.Join(root, "app.conf")))
		_, err = w.Write(map[string]unpack.File{"app.conf": file("v2"), "other": file("o2")})
		require.NoError(t, err)
		assert.Equal(t, "v2", read(t, root, "app.conf"))
		assert.Equal(t, "o2", read(t, root, "other"))
	})
	t.Run("a file inside the live set replaced by a folder is rewritten", func(t *testing.T) {
		root := t.TempDir()
		w := unpack.New(root)
		set := map[string]unpack.File{"sub/x": file("1")}
		_, err := w.Write(set)
		require.NoError(t, err)
		live := filepath.Join(root, liveFolder(t, root))
		require.NoError(t, os.Remove(filepath.Join(live, "sub/x")))
		require.NoError(t, os.Mkdir(filepath.Join(live, "sub/x"), 0o755))

		changed, err := w.Write(set)
		require.NoError(t, err)
		assert.True(t, changed, "the live set no longer matches, so it is written again")
		assert.Equal(t, "1", read(t, root, "sub/x"))
	})
	t.Run("a deleted name comes back without a new folder", func(t *testing.T) {
		root := t.TempDir()
		w := unpack.New(root)
		set := map[string]unpack.File{"app.conf": file("v1")}
		_, err := w.Write(set)
		require.NoError(t, err)
		live := liveFolder(t, root)
		require.NoError(t, os.Remove(filepath.Join(root, "app.conf")))

		changed, err := w.Write(set)
		require.NoError(t, err)
		assert.False(t, changed, "the content did not change; the app need not reload")
		assert.Equal(t, "v1", read(t, root, "app.conf"))
		assert.Equal(t, live, liveFolder(t, root))
	})
	t.Run("..data replaced by a folder is reported, not followed", func(t *testing.T) {
		root := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(root, "..data"), 0o755))
		_, err := unpack.New(root).Write(map[string]unpack.File{"app.conf": file("v1")})
		require.EqualError(t, err, "..data under "+root+" is not the symlink configwave makes; something else wrote it: remove it, or choose another --configroot")
	})
}

// In a volume shared with an app (or an attacker with the app's rights), every name the writer
// passes through can be swapped for a symlink between two writes. None may carry a read, a
// write or a removal outside the root.
func TestSymlinkSwapsInASharedRoot(t *testing.T) {
	setup := func(t *testing.T) (root, outside string, w *unpack.Writer) {
		base := t.TempDir()
		root, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
		require.NoError(t, os.MkdirAll(root, 0o755))
		require.NoError(t, os.MkdirAll(outside, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(outside, "x"), []byte("keep me"), 0o644))
		w = unpack.New(root)
		_, err := w.Write(map[string]unpack.File{"sub/x": file("1"), "sub/deeper/y": file("y")})
		require.NoError(t, err)
		return root, outside, w
	}
	untouched := func(t *testing.T, outside string) {
		t.Helper()
		assert.Equal(t, "keep me", read(t, outside, "x"))
		des, err := os.ReadDir(outside)
		require.NoError(t, err)
		assert.Len(t, des, 1, "nothing was written beside it")
	}

	t.Run("a folder inside the live set", func(t *testing.T) {
		root, outside, w := setup(t)
		sub := filepath.Join(root, liveFolder(t, root), "sub")
		require.NoError(t, os.RemoveAll(sub))
		require.NoError(t, os.Symlink(outside, sub))

		changed, err := w.Write(map[string]unpack.File{"sub/x": file("1"), "sub/deeper/y": file("y")})
		require.NoError(t, err)
		assert.True(t, changed, "a link is never taken for the folder it replaced")
		assert.Equal(t, "1", read(t, root, "sub/x"))
		time.Sleep(2100 * time.Millisecond) // past the retire grace: the next write removes the old folder
		_, err = w.Write(map[string]unpack.File{"sub/x": file("2"), "sub/deeper/y": file("y")})
		require.NoError(t, err)
		assert.Equal(t, "2", read(t, root, "sub/x"))
		assert.NoFileExists(t, sub, "the retired folder, with the planted link in it, is gone")
		untouched(t, outside)
	})
	t.Run("a nested folder inside the live set, relative link", func(t *testing.T) {
		root, outside, w := setup(t)
		deeper := filepath.Join(root, liveFolder(t, root), "sub", "deeper")
		require.NoError(t, os.RemoveAll(deeper))
		require.NoError(t, os.Symlink("../../../outside", deeper))

		_, err := w.Write(map[string]unpack.File{"sub/x": file("1"), "sub/deeper/y": file("y2")})
		require.NoError(t, err)
		assert.Equal(t, "y2", read(t, root, "sub/deeper/y"))
		untouched(t, outside)
	})
	t.Run("a user-visible folder name", func(t *testing.T) {
		root, outside, w := setup(t)
		require.NoError(t, os.Remove(filepath.Join(root, "sub")))
		require.NoError(t, os.Symlink(outside, filepath.Join(root, "sub")))

		_, err := w.Write(map[string]unpack.File{"sub/x": file("2"), "sub/deeper/y": file("y")})
		require.EqualError(t, err, "sub under "+root+" is a symlink that configwave did not write; move it away or choose another --configroot")
		untouched(t, outside)
	})
	t.Run("the live folder itself", func(t *testing.T) {
		root, outside, w := setup(t)
		live := filepath.Join(root, liveFolder(t, root))
		require.NoError(t, os.RemoveAll(live))
		require.NoError(t, os.Symlink(outside, live))

		// outside holds x = "keep me": were it read through the link, this set would look
		// unchanged and nothing would be written.
		changed, err := w.Write(map[string]unpack.File{"x": file("keep me")})
		require.NoError(t, err)
		assert.True(t, changed, "a live folder swapped for a link out of the root is never read")
		info, err := os.Lstat(filepath.Join(root, liveFolder(t, root)))
		require.NoError(t, err)
		assert.True(t, info.IsDir(), "..data points at a real folder again")
		assert.Equal(t, "keep me", read(t, root, "x"))
		untouched(t, outside)
	})
	t.Run("..data_tmp planted as a link", func(t *testing.T) {
		root, outside, w := setup(t)
		require.NoError(t, os.Symlink(outside, filepath.Join(root, "..data_tmp")))

		_, err := w.Write(map[string]unpack.File{"sub/x": file("2"), "sub/deeper/y": file("y")})
		require.NoError(t, err)
		assert.Equal(t, "2", read(t, root, "sub/x"))
		untouched(t, outside)
	})
}
