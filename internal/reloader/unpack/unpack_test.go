package unpack_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/reloader/unpack"
)

func file(s string) unpack.File { return unpack.File{Data: []byte(s), Mode: 0o644} }

func read(t *testing.T, root, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	require.NoError(t, err)
	return string(b)
}

func TestWrite(t *testing.T) {
	t.Run("first write creates files reachable by their names", func(t *testing.T) {
		root := t.TempDir()
		changed, err := unpack.New(root).Write(map[string]unpack.File{"a.conf": file("A"), "sub/b.conf": file("B")})
		require.NoError(t, err)
		assert.True(t, changed)
		assert.Equal(t, "A", read(t, root, "a.conf"))
		assert.Equal(t, "B", read(t, root, "sub/b.conf"))
	})
	t.Run("same content writes nothing", func(t *testing.T) {
		root := t.TempDir()
		w := unpack.New(root)
		_, err := w.Write(map[string]unpack.File{"a": file("A")})
		require.NoError(t, err)
		before, err := os.Readlink(filepath.Join(root, "..data"))
		require.NoError(t, err)
		changed, err := w.Write(map[string]unpack.File{"a": file("A")})
		require.NoError(t, err)
		assert.False(t, changed)
		after, _ := os.Readlink(filepath.Join(root, "..data"))
		assert.Equal(t, before, after, "no new folder for unchanged content")
	})
	t.Run("mode change is a change", func(t *testing.T) {
		root := t.TempDir()
		w := unpack.New(root)
		_, err := w.Write(map[string]unpack.File{"a": file("A")})
		require.NoError(t, err)
		changed, err := w.Write(map[string]unpack.File{"a": {Data: []byte("A"), Mode: 0o600}})
		require.NoError(t, err)
		assert.True(t, changed)
		info, err := os.Stat(filepath.Join(root, "a"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	})
	t.Run("removed key disappears", func(t *testing.T) {
		root := t.TempDir()
		w := unpack.New(root)
		_, err := w.Write(map[string]unpack.File{"a": file("A"), "b": file("B")})
		require.NoError(t, err)
		_, err = w.Write(map[string]unpack.File{"a": file("A2")})
		require.NoError(t, err)
		assert.Equal(t, "A2", read(t, root, "a"))
		assert.NoFileExists(t, filepath.Join(root, "b"))
	})
	t.Run("removed key disappears after a restart too", func(t *testing.T) {
		// A new Writer knows nothing of the live set: its names come from its folder.
		root := t.TempDir()
		_, err := unpack.New(root).Write(map[string]unpack.File{"a": file("A"), "b": file("B")})
		require.NoError(t, err)
		_, err = unpack.New(root).Write(map[string]unpack.File{"a": file("A2")})
		require.NoError(t, err)
		assert.Equal(t, "A2", read(t, root, "a"))
		assert.NoFileExists(t, filepath.Join(root, "b"))
	})
	t.Run("a live set edited on disk is written again, even when the set did not change", func(t *testing.T) {
		root := t.TempDir()
		w := unpack.New(root)
		_, err := w.Write(map[string]unpack.File{"a": file("A")})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(root, "a"), []byte("edited"), 0o644))
		changed, err := w.Write(map[string]unpack.File{"a": file("A")})
		require.NoError(t, err)
		assert.True(t, changed)
		assert.Equal(t, "A", read(t, root, "a"))
	})
	t.Run("swapped-out folder is removed by a later write after the grace period", func(t *testing.T) {
		root := t.TempDir()
		w := unpack.New(root)
		_, err := w.Write(map[string]unpack.File{"a": file("A")})
		require.NoError(t, err)
		_, err = w.Write(map[string]unpack.File{"a": file("A2")})
		require.NoError(t, err)
		time.Sleep(2100 * time.Millisecond)
		_, err = w.Write(map[string]unpack.File{"a": file("A2")})
		require.NoError(t, err)
		entries, err := os.ReadDir(root)
		require.NoError(t, err)
		assert.Len(t, entries, 3, "only ..data, the folder it points at, and a; got %v", entries)
	})
	t.Run("a link the app deleted comes back with the next write", func(t *testing.T) {
		for _, next := range []string{"A", "A2"} { // the same set, and a new one
			root := t.TempDir()
			w := unpack.New(root)
			_, err := w.Write(map[string]unpack.File{"a": file("A"), "b": file("B")})
			require.NoError(t, err)
			require.NoError(t, os.Remove(filepath.Join(root, "a")))
			_, err = w.Write(map[string]unpack.File{"a": file(next), "b": file("B")})
			require.NoError(t, err)
			assert.Equal(t, next, read(t, root, "a"))
			assert.Equal(t, "B", read(t, root, "b"))
		}
	})
	t.Run("a path that is also another path's folder is rejected", func(t *testing.T) {
		root := t.TempDir()
		_, err := unpack.New(root).Write(map[string]unpack.File{"conf.d/site": file("A"), "conf.d/site/x": file("B")})
		require.ErrorContains(t, err, `"conf.d/site" is both a file and the folder`)
		assert.NoFileExists(t, filepath.Join(root, "..data"))
	})
	t.Run("files the writer did not write are never touched", func(t *testing.T) {
		root := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(root, "mine"), []byte("user"), 0o644))
		w := unpack.New(root)
		_, err := w.Write(map[string]unpack.File{"a": file("A")})
		require.NoError(t, err)
		_, err = w.Write(map[string]unpack.File{"mine": file("X")})
		require.ErrorContains(t, err, "mine under "+root+" is a file that configwave did not write")
		assert.Equal(t, "user", read(t, root, "mine"))
		assert.Equal(t, "A", read(t, root, "a"), "last good set stays in place")
	})
	t.Run("bad path rejects the whole set and keeps the last good one", func(t *testing.T) {
		root := t.TempDir()
		w := unpack.New(root)
		_, err := w.Write(map[string]unpack.File{"a": file("A")})
		require.NoError(t, err)
		_, err = w.Write(map[string]unpack.File{"a": file("A2"), "../escape": file("X")})
		require.ErrorContains(t, err, `"../escape"`)
		assert.Equal(t, "A", read(t, root, "a"))
		assert.NoFileExists(t, filepath.Join(filepath.Dir(root), "escape"))
	})
}

func TestValidatePath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"app.yaml", true},
		{"conf.d/site.conf", true},
		{".hidden", true},
		{"", false},
		{"/etc/passwd", false},
		{"../x", false},
		{"a/../../x", false},
		{"a/./b", false},
		{"a//b", false},
		{"..data", false},
		{"a/..x", false},
		{"a\x00b", false},
	} {
		err := unpack.ValidatePath(tc.path)
		assert.Equal(t, tc.ok, err == nil, "path %q: %v", tc.path, err)
	}
}

func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../a", "/a", "..data", "a//b", "."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if unpack.ValidatePath(p) != nil {
			return
		}
		root := "/root/of/config"
		joined := filepath.Join(root, filepath.FromSlash(p))
		rel, err := filepath.Rel(root, joined)
		if err != nil || rel == "." || rel == ".." || filepath.IsAbs(rel) || len(rel) >= 2 && rel[:2] == ".." {
			t.Fatalf("accepted path %q lands outside the root: %q", p, joined)
		}
	})
}

// A reader hammering the files during many swaps must always see one complete set: both files
// present and from the same generation.
func TestConcurrentReaderNeverSeesMixedSet(t *testing.T) {
	root := t.TempDir()
	w := unpack.New(root)
	_, err := w.Write(map[string]unpack.File{"a": file("0"), "dir/b": file("0")})
	require.NoError(t, err)

	var stop atomic.Bool
	var reads, bad atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				a, errA := os.ReadFile(filepath.Join(root, "a"))
				b, errB := os.ReadFile(filepath.Join(root, "dir/b"))
				// Reading a then b can straddle one swap; a set is mixed only if b is older than a.
				if errA != nil || errB != nil {
					bad.Add(1)
				} else if na, nb := atoi(a), atoi(b); nb < na {
					bad.Add(1)
				}
				reads.Add(1)
			}
		}()
	}
	for i := 1; i <= 1000; i++ {
		v := strconv.Itoa(i)
		_, err := w.Write(map[string]unpack.File{"a": file(v), "dir/b": file(v)})
		require.NoError(t, err)
	}
	stop.Store(true)
	wg.Wait()
	assert.Zero(t, bad.Load(), "reads that saw a missing file or a mixed set, of %d", reads.Load())
	assert.Positive(t, reads.Load())
}

func atoi(b []byte) int { n, _ := strconv.Atoi(string(b)); return n }

func TestWriteChecked(t *testing.T) {
	root := t.TempDir()
	w := unpack.New(root)
	_, err := w.Write(map[string]unpack.File{"app.conf": file("good"), "sub/x": file("1")})
	require.NoError(t, err)

	var sawDir string
	rejected := errors.New("config rejected")
	changed, err := w.WriteChecked(map[string]unpack.File{"app.conf": file("bad"), "sub/x": file("2")}, func(dir string) error {
		sawDir = dir
		// The check sees the new set complete, in the root's layout, while readers see the old.
		assert.Equal(t, "bad", read(t, dir, "app.conf"))
		assert.Equal(t, "2", read(t, dir, "sub/x"))
		assert.Equal(t, "good", read(t, root, "app.conf"))
		return rejected
	})
	assert.ErrorIs(t, err, rejected)
	assert.False(t, changed)
	assert.Equal(t, "good", read(t, root, "app.conf"), "a rejected set is never swapped in")
	assert.Equal(t, "1", read(t, root, "sub/x"))
	assert.NoDirExists(t, sawDir, "the rejected folder is removed")

	changed, err = w.WriteChecked(map[string]unpack.File{"app.conf": file("fixed")}, func(string) error { return nil })
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, "fixed", read(t, root, "app.conf"))
	assert.NoFileExists(t, filepath.Join(root, "sub/x"))
}

// A ..data link planted by someone else (a shared volume) never makes the writer read, keep or
// delete anything outside the root.
func TestPlantedDataLinkNeverReachesOutsideTheRoot(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	require.NoError(t, os.MkdirAll(root, 0o755))
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "precious"), []byte("keep me"), 0o644))
	require.NoError(t, os.Symlink("../outside", filepath.Join(root, "..data")))

	w := unpack.New(root)
	changed, err := w.Write(map[string]unpack.File{"app.conf": file("v1")})
	require.NoError(t, err)
	assert.True(t, changed)
	time.Sleep(2100 * time.Millisecond) // past the retire grace: a retired folder would go now
	_, err = w.Write(map[string]unpack.File{"app.conf": file("v2")})
	require.NoError(t, err)
	assert.Equal(t, "v2", read(t, root, "app.conf"))
	assert.Equal(t, "keep me", read(t, outside, "precious"), "nothing outside the root is removed")
}
