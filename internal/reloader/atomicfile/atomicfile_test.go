package atomicfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prometheus.env.yaml")
	changed, err := Write(path, []byte("a"), 0o640)
	require.NoError(t, err)
	assert.True(t, changed)
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), st.Mode().Perm())
	changed, err = Write(path, []byte("a"), 0o640)
	require.NoError(t, err)
	assert.False(t, changed, "the same content: nothing written")

	// A crash between the temporary file and the rename leaves one behind; Clean takes it.
	left := filepath.Join(filepath.Dir(path), ".prometheus.env.yaml.tmp-123")
	require.NoError(t, os.WriteFile(left, []byte("half"), 0o600))
	other := filepath.Join(filepath.Dir(path), ".other.tmp-1")
	require.NoError(t, os.WriteFile(other, nil, 0o600))
	require.NoError(t, Clean(path))
	assert.NoFileExists(t, left)
	assert.FileExists(t, other, "only this file's leftovers")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "a", string(b))

	_, err = Write(filepath.Join(t.TempDir(), "missing", "x"), []byte("a"), 0o644)
	assert.ErrorContains(t, err, "is its folder a writable emptyDir?")
}
