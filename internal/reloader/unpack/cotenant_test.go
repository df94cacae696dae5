package unpack_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/reloader/unpack"
)

// A co-tenant container shares the config root and, as fast as it can, swaps every folder,
// link and name the writer uses for a link out of the root (relative and absolute) while the
// writer keeps writing and checking new sets. Whatever the interleaving, nothing outside the
// root is read, written, chmodded or removed: the writer's steps go through an os.Root.
func TestCoTenantSwappingLinksCannotReachOutside(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	require.NoError(t, os.Mkdir(root, 0o755))
	require.NoError(t, os.Mkdir(outside, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "keep"), []byte("precious"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(outside, "sub"), 0o700))
	targets := []string{outside, "../outside", filepath.Join(outside, "sub")}

	var stop atomic.Bool
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			entries, _ := os.ReadDir(root)
			for _, e := range entries {
				name := e.Name()
				p := filepath.Join(root, name)
				target := targets[i%len(targets)]
				switch {
				case strings.HasPrefix(name, "..") && e.IsDir():
					// A set folder, being written or checked or live: move it aside, plant a link.
					if os.Rename(p, p+".moved") == nil {
						_ = os.Symlink(target, p)
						swaps.Add(1)
					}
				case strings.HasSuffix(name, ".moved"):
					_ = os.RemoveAll(p)
				case name == "..data" || name == "..data_tmp" || name == "conf" || name == "app.conf":
					if os.Remove(p) == nil {
						_ = os.Symlink(target, p)
						swaps.Add(1)
					}
				}
			}
		}
	}()

	w := unpack.New(root)
	var checked atomic.Int64
	for i := range 300 {
		v := strconv.Itoa(i)
		files := map[string]unpack.File{"app.conf": {Data: []byte(v), Mode: 0o644}, "conf/x.conf": {Data: []byte("secret-" + v), Mode: 0o600}}
		_, _ = w.WriteChecked(files, func(dir string) error { checked.Add(1); return nil })
		if i%50 == 0 { // a restarted writer also tidies up what it finds
			w = unpack.New(root)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d link swaps by the co-tenant during 300 writes, %d checks run", swaps.Load(), checked.Load())
	require.Positive(t, swaps.Load(), "the co-tenant never got in: the test proves nothing")

	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"keep", "sub"}, names, "nothing created or removed outside the root")
	sub, err := os.ReadDir(filepath.Join(outside, "sub"))
	require.NoError(t, err)
	assert.Empty(t, sub, "nothing written into a folder outside the root")
	b, err := os.ReadFile(filepath.Join(outside, "keep"))
	require.NoError(t, err)
	assert.Equal(t, "precious", string(b))
	for name, mode := range map[string]os.FileMode{"": 0o700, "keep": 0o600, "sub": 0o700} {
		info, err := os.Stat(filepath.Join(outside, name))
		require.NoError(t, err)
		assert.Equal(t, mode, info.Mode().Perm(), "mode of %q changed", name)
	}
}
