package testcluster

import (
	"archive/zip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestApplyEdits(t *testing.T) {
	edits := []sourceEdit{{"a.go", `"0.0.0.0:%d"`, `"127.0.0.1:%d"`}}
	for _, tc := range []struct {
		name, file, in, want, err string
	}{
		{name: "the line once", file: "a.go", in: `x := fmt.Sprintf("0.0.0.0:%d", p)`, want: `x := fmt.Sprintf("127.0.0.1:%d", p)`},
		{name: "another file is left alone", file: "b.go", in: `"0.0.0.0:%d"`, want: `"0.0.0.0:%d"`},
		{name: "a version that moved the line", file: "a.go", in: `net.JoinHostPort("", p)`, err: `has "\"0.0.0.0:%d\"" 0 times, not once`},
		{name: "a version with a second listener", file: "a.go", in: `"0.0.0.0:%d" "0.0.0.0:%d"`, err: "2 times, not once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := applyEdits("example.com/m@v1.0.0", tc.file, tc.in, edits)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				assert.ErrorContains(t, err, "example.com/m@v1.0.0: a.go")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestBuildableGoLine(t *testing.T) {
	for _, tc := range []struct{ name, in, local, want string }{
		{"a later patch release of the same language", "module m\n\ngo 1.26.10\n\ntoolchain go1.26.11\n", "go1.26.8", "module m\n\ngo 1.26.0\n\n"},
		{"an earlier language stays", "module m\n\ngo 1.24.0\n\ntoolchain go1.24.3\n", "go1.26.8", "module m\n\ngo 1.24.0\n\n"},
		{"a later language stays, for go to refuse", "module m\n\ngo 1.27.1\n", "go1.26.8", "module m\n\ngo 1.27.1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, buildableGoLine(tc.in, tc.local))
		})
	}
}

func TestRequiredVersion(t *testing.T) {
	gomod := "module m\n\nrequire example.com/one v1.2.3\n\nrequire (\n\texample.com/two v0.4.0 // indirect\n\texample.com/two/sub v9.9.9\n)\n"
	for module, want := range map[string]string{"example.com/one": "v1.2.3", "example.com/two": "v0.4.0", "example.com/two/sub": "v9.9.9"} {
		got, err := requiredVersion(gomod, module)
		require.NoError(t, err)
		assert.Equal(t, want, got, module)
	}
	_, err := requiredVersion(gomod, "example.com/three")
	assert.ErrorContains(t, err, "requires no example.com/three")
}

func TestCopyPatched(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "m.zip")
	writeZip(t, archive, map[string]string{
		"example.com/m@v1.0.0/go.mod":      "module example.com/m\n\ngo 1.26.10\n",
		"example.com/m@v1.0.0/srv/main.go": `addr := "0.0.0.0:%d"`,
		"example.com/m@v1.0.0/README":      "hello",
	})
	edits := []sourceEdit{{"srv/main.go", `"0.0.0.0:%d"`, `"127.0.0.1:%d"`}}
	dst := filepath.Join(dir, "copy")
	require.NoError(t, copyPatched("example.com/m@v1.0.0", archive, dst, edits, "go1.26.8"))
	for file, want := range map[string]string{"go.mod": "module example.com/m\n\ngo 1.26.0\n", "srv/main.go": `addr := "127.0.0.1:%d"`, "README": "hello"} {
		b, err := os.ReadFile(filepath.Join(dst, file))
		require.NoError(t, err)
		assert.Equal(t, want, string(b), file)
	}

	missing := []sourceEdit{{"srv/gone.go", "a", "b"}}
	assert.ErrorContains(t, copyPatched("example.com/m@v1.0.0", archive, filepath.Join(dir, "copy2"), missing, "go1.26.8"), "has no srv/gone.go")

	evil := filepath.Join(dir, "evil.zip")
	writeZip(t, evil, map[string]string{"example.com/m@v1.0.0/../../escape": "x"})
	assert.ErrorContains(t, copyPatched("example.com/m@v1.0.0", evil, filepath.Join(dir, "copy3"), nil, "go1.26.8"), "outside example.com/m@v1.0.0/")
	assert.NoFileExists(t, filepath.Join(dir, "escape"))
}

func writeZip(t *testing.T, path string, files map[string]string) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	w := zip.NewWriter(f)
	for name, content := range files {
		fw, err := w.Create(name)
		require.NoError(t, err)
		_, err = fw.Write([]byte(content))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())
}
