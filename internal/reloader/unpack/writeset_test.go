package unpack

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A subfolder of the new set swapped for a symlink after it was made and before a file is
// opened in it (a race with a process sharing the root) cannot carry the write outside.
func TestWriteSetRefusesALinkOutOfTheNewFolder(t *testing.T) {
	base := t.TempDir()
	dir, outside := filepath.Join(base, "new"), filepath.Join(base, "outside")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Mkdir(outside, 0o755))
	for _, target := range []string{outside, "../outside"} {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, "sub")))
		require.NoError(t, os.Symlink(target, filepath.Join(dir, "sub")))

		root, err := os.OpenRoot(base)
		require.NoError(t, err)
		err = writeSet(root, "new", map[string]File{"sub/x": {Data: []byte("secret"), Mode: 0o600}})
		root.Close()
		require.Error(t, err, "link to %s", target)
		assert.Contains(t, err.Error(), `"sub/x"`)
		assert.NoFileExists(t, filepath.Join(outside, "x"))
	}
}
