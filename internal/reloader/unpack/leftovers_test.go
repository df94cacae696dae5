package unpack_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/reloader/unpack"
)

// hidden lists the writer's folders under root (names starting with "..", not its links).
func hidden(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") && e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

// A sidecar restarted 20 times, with a change each time, leaves the live set and at most the
// one it replaced: an old Secret value does not pile up in a volume that lives for months.
func TestRestartsLeaveAtMostOnePreviousSet(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, "..2020_01_01_00_00_00.123"), 0o700)) // half-made by a killed writer
	require.NoError(t, os.WriteFile(filepath.Join(root, "..notours"), nil, 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(root, "..2020_01_01_00_00_00.abc"), 0o700)) // not our pattern
	for i := range 20 {
		w := unpack.New(root) // a new process each time: it knows nothing of the folders before it
		_, err := w.Write(map[string]unpack.File{"token": {Data: []byte("secret-" + strconv.Itoa(i)), Mode: 0o600}})
		require.NoError(t, err)
		assert.LessOrEqual(t, len(hidden(t, root)), 3, "live, the one it replaced, and the folder not of our pattern: %v", hidden(t, root))
	}
	assert.Equal(t, "secret-19", read(t, root, "token"))
	assert.FileExists(t, filepath.Join(root, "..notours"), "a file not of our pattern is left alone")
	assert.DirExists(t, filepath.Join(root, "..2020_01_01_00_00_00.abc"), "a folder not of our pattern is left alone")
	assert.NoDirExists(t, filepath.Join(root, "..2020_01_01_00_00_00.123"))
}

// The folder a swap retires is removed once its grace has passed, with no further write.
func TestRetiredSetIsRemovedAfterItsGrace(t *testing.T) {
	root := t.TempDir()
	w := unpack.New(root)
	_, err := w.Write(map[string]unpack.File{"a": file("1")})
	require.NoError(t, err)
	_, err = w.Write(map[string]unpack.File{"a": file("2")})
	require.NoError(t, err)
	assert.Len(t, hidden(t, root), 2, "the previous set stays for readers still inside it")
	require.Eventually(t, func() bool { return len(hidden(t, root)) == 1 }, 10*time.Second, 20*time.Millisecond,
		"only the live set is left after the grace: %v", hidden(t, root))
	assert.Equal(t, "2", read(t, root, "a"))
}

func TestHasLiveSet(t *testing.T) {
	root := t.TempDir()
	w := unpack.New(root)
	assert.False(t, w.HasLiveSet(), "an empty root")
	require.NoError(t, os.Symlink("../elsewhere", filepath.Join(root, "..data")))
	assert.False(t, w.HasLiveSet(), "a ..data link that is not of our form")
	require.NoError(t, os.Remove(filepath.Join(root, "..data")))
	_, err := w.Write(map[string]unpack.File{"a": file("1")})
	require.NoError(t, err)
	assert.True(t, unpack.New(root).HasLiveSet(), "a restarted writer finds the set")
}
