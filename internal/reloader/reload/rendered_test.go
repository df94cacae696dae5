package reload

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/reloader/source"
	"github.com/configwave/configwave/internal/reloader/unpack"
)

// prometheus-config-reloader's rendered config is checked before it replaces the output: a
// config the check rejects is never live, and the check sees the rendered file, $(NAME)
// expanded, in $CONFIG_DIR under the output's name.
func TestRenderedIsCheckedBeforeItIsLive(t *testing.T) {
	t.Setenv("REPLICA", "prometheus-0")
	out := filepath.Join(t.TempDir(), "prometheus.env.yaml")
	r := &Rendered{Input: "/etc/prometheus/config/prometheus.yaml", Output: out}
	var seen []string
	check := func(dir string) error {
		b, err := os.ReadFile(filepath.Join(dir, "prometheus.env.yaml"))
		if err != nil {
			return err
		}
		seen = append(seen, string(b))
		if string(b) == "replica: prometheus-0 bad" {
			return fmt.Errorf("%w: bad", ErrRejected)
		}
		return nil
	}
	set := func(v string) map[string]unpack.File {
		return map[string]unpack.File{r.Input: {Data: []byte("replica: $(REPLICA)" + v)}}
	}

	changed, err := r.WriteChecked(set(""), check)
	require.NoError(t, err)
	assert.True(t, changed)
	got, _ := os.ReadFile(out)
	assert.Equal(t, "replica: prometheus-0", string(got))

	changed, err = r.WriteChecked(set(" bad"), check)
	require.ErrorIs(t, err, ErrRejected)
	assert.False(t, changed)
	got, _ = os.ReadFile(out)
	assert.Equal(t, "replica: prometheus-0", string(got), "the rejected config never replaced the live one")
	assert.Equal(t, []string{"replica: prometheus-0", "replica: prometheus-0 bad"}, seen, "the check read the rendered config")
	entries, err := os.ReadDir(filepath.Dir(out))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "the folder the check ran in is gone")

	changed, err = r.WriteChecked(set(""), check)
	require.NoError(t, err)
	assert.False(t, changed, "the set accepted before: nothing to do")
}

// From the folder source, the set holds the config file's digest: the file is read where it is
// and rendered only while it is the file the set describes.
func TestRenderedReadsTheFileTheSetDescribes(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "prometheus.yaml")
	require.NoError(t, os.WriteFile(in, []byte("v: 1"), 0o644))
	out := filepath.Join(t.TempDir(), "prometheus.env.yaml")
	r := &Rendered{Input: in, Output: out, Content: func(path string, f unpack.File) ([]byte, error) { return source.ReadVerified(path, f.Data) }}
	set := func(v string) map[string]unpack.File {
		return map[string]unpack.File{in: {Data: source.FileDigest([]byte(v))}}
	}

	changed, err := r.WriteChecked(set("v: 1"), nil)
	require.NoError(t, err)
	assert.True(t, changed)
	got, _ := os.ReadFile(out)
	assert.Equal(t, "v: 1", string(got))

	require.NoError(t, os.WriteFile(in, []byte("v: 3"), 0o644)) // changed again after the read of "v: 2"
	changed, err = r.WriteChecked(set("v: 2"), nil)
	require.NoError(t, err, "a change under way is not an error")
	assert.False(t, changed, "nothing rendered from a file the set does not describe")
	got, _ = os.ReadFile(out)
	assert.Equal(t, "v: 1", string(got))

	changed, err = r.WriteChecked(set("v: 3"), nil)
	require.NoError(t, err)
	assert.True(t, changed)
	got, _ = os.ReadFile(out)
	assert.Equal(t, "v: 3", string(got))
}

// Without --config-envsubst-file the app reads --config-file as it is: the check runs in that
// file's own folder, not in the first --watched-dir (InPlace.Dir), so `promtool check config
// "$CONFIG_DIR/prometheus.yaml"` finds it.
func TestRenderedWithoutOutputChecksTheConfigFilesFolder(t *testing.T) {
	watched := t.TempDir()
	input := filepath.Join(t.TempDir(), "prometheus.yaml")
	r := &Rendered{InPlace: InPlace{Dir: watched}, Input: input}
	var dirs []string
	check := func(dir string) error { dirs = append(dirs, dir); return nil }
	_, err := r.WriteChecked(map[string]unpack.File{input: {Data: []byte("global: {}")}}, check)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Dir(input)}, dirs)
}
