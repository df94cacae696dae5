package configfile

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func gz(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return b.Bytes()
}

func TestFile(t *testing.T) {
	vars := env(map[string]string{"POD_NAME": "prometheus-k8s-1", "SHARD": "0", "EMPTY": ""})
	tests := []struct {
		name      string
		in        []byte
		want      string
		wantUnset []string
	}{
		{"plain text passes through", []byte("a: b\n"), "a: b\n", nil},
		{"$(NAME) is expanded", []byte("replica: $(POD_NAME)\nshard: $(SHARD)"), "replica: prometheus-k8s-1\nshard: 0", nil},
		{"a variable set to empty is expanded to empty", []byte("x: '$(EMPTY)'"), "x: ''", nil},
		{"$NAME and ${NAME} are left alone: Prometheus relabelling uses them", []byte("replacement: ${1}:$POD_NAME"), "replacement: ${1}:$POD_NAME", nil},
		{"an unset variable stays as written and is reported once", []byte("$(NOPE) $(NOPE) $(POD_NAME) $(ALSO)"), "$(NOPE) $(NOPE) prometheus-k8s-1 $(ALSO)", []string{"NOPE", "ALSO"}},
		{"names are [A-Za-z0-9_] only", []byte("$(A-B) $(a.b) $()"), "$(A-B) $(a.b) $()", nil},
		{"gzip is unpacked first", gz("replica: $(POD_NAME)\n"), "replica: prometheus-k8s-1\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, unset, err := File(tt.in, vars)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(out))
			assert.Equal(t, tt.wantUnset, unset)
		})
	}
}

func TestFileRefusesBadAndHugeGzip(t *testing.T) {
	_, _, err := File(append([]byte{0x1f, 0x8b, 0x08}, "not really"...), env(nil))
	require.ErrorContains(t, err, "starts as gzip but is not")

	bomb := gz(strings.Repeat("a", MaxSize+1))
	_, _, err = File(bomb, env(nil))
	require.ErrorContains(t, err, "more than 64 MiB")
}

func TestWriteAtomic(t *testing.T) {
	p := filepath.Join(t.TempDir(), "prometheus.env.yaml")
	changed, err := WriteAtomic(p, []byte("v1"), 0o644)
	require.NoError(t, err)
	assert.True(t, changed)
	changed, err = WriteAtomic(p, []byte("v1"), 0o644)
	require.NoError(t, err)
	assert.False(t, changed, "the same content writes nothing")
	changed, err = WriteAtomic(p, []byte("v2"), 0o644)
	require.NoError(t, err)
	assert.True(t, changed)
	b, _ := os.ReadFile(p)
	assert.Equal(t, "v2", string(b))
	entries, _ := os.ReadDir(filepath.Dir(p))
	assert.Len(t, entries, 1, "no temporary file left behind")

	_, err = WriteAtomic(filepath.Join(t.TempDir(), "no", "such", "folder", "x"), []byte("v"), 0o644)
	require.ErrorContains(t, err, "writable emptyDir")
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"$(A)", "$(A)$(B)", "$$(A)", "$(", "$(A", "${A}", "$(POD_NAME)-$(X)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, unset := Expand([]byte(s), env(map[string]string{"A": "alpha", "POD_NAME": "p-0"}))
		// With nothing set, the input comes back unchanged and every reference is reported.
		same, all := Expand([]byte(s), env(nil))
		require.Equal(t, s, string(same))
		require.Subset(t, all, unset)
		if !strings.Contains(s, "$(A)") && !strings.Contains(s, "$(POD_NAME)") {
			require.Equal(t, s, string(out))
		}
	})
}
