package reload

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/reloader/unpack"
)

func TestToldRecordRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), ToldRecordName)
	files := map[string]unpack.File{"a": {Data: []byte("s3cr3t"), Mode: 0o600}}
	w := &ToldRecord{Path: path}
	require.NoError(t, w.Load(), "no file is no record")
	assert.False(t, w.Recorded())
	require.NoError(t, w.Save(w.Sum(files)))

	r := &ToldRecord{Path: path}
	require.NoError(t, r.Load())
	assert.True(t, r.Recorded())
	assert.False(t, r.Untold(r.Sum(files)), "same set, same key: the app took it")
	assert.True(t, r.Untold(r.Sum(map[string]unpack.File{"a": {Data: []byte("other"), Mode: 0o600}})))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "s3cr3t")
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left")
}

// The record sits in a volume other containers may write: whatever it holds, Load never panics,
// and anything but a record this reloader wrote says the app may not have the set on disk (it
// is told again), with an error naming the file.
func FuzzToldRecord(f *testing.F) {
	f.Add([]byte("configwave-told v1 00 11\n"))
	f.Add([]byte("configwave-told v1 0000000000000000000000000000000000000000000000000000000000000000 0000000000000000000000000000000000000000000000000000000000000000\n"))
	f.Add([]byte(""))
	f.Add([]byte("\x00\xff garbage"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, ToldRecordName)
		require.NoError(t, os.WriteFile(path, b, 0o600))
		r := &ToldRecord{Path: path}
		err := r.Load()
		if err != nil {
			assert.True(t, r.Untold(r.Sum(nil)), "not known what the app took: told again")
			assert.Contains(t, err.Error(), path)
			assert.Len(t, r.key, 32, "a fresh key all the same")
		}
	})
}
