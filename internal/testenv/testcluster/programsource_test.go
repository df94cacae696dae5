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
	for _, tc := range []struct{ name, in, ours, want string }{
		{"a later patch release of our language", "module m\n\ngo 1.26.10\n\ntoolchain go1.26.11\n", "1.26.0", "module m\n\ngo 1.26.0\n\n"},
		{"our own go line stays", "module m\n\ngo 1.26.0\n", "1.26.0", "module m\n\ngo 1.26.0\n"},
		{"an earlier language stays", "module m\n\ngo 1.24.0\n\ntoolchain go1.24.3\n", "1.26.0", "module m\n\ngo 1.24.0\n\n"},
		{"a later language stays, for go to refuse", "module m\n\ngo 1.27.1\n", "1.26.0", "module m\n\ngo 1.27.1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, buildableGoLine(tc.in, tc.ours))
		})
	}
}

func TestRequiredVersion(t *testing.T) {
	gomod := `module m

go 1.26.0

require example.com/one v1.2.3

require (
	example.com/two v0.4.0 // indirect
	example.com/two/sub v9.9.9
)

replace example.com/four v1.0.0 => ../four

replace (
	example.com/five => example.com/five v2.0.0
)

exclude example.com/six v1.0.0
`
	for module, want := range map[string]string{"example.com/one": "v1.2.3", "example.com/two": "v0.4.0", "example.com/two/sub": "v9.9.9"} {
		got, err := requiredVersion(gomod, module)
		require.NoError(t, err)
		assert.Equal(t, want, got, module)
	}
	for _, module := range []string{"example.com/three", "example.com/four", "example.com/five", "example.com/six"} {
		_, err := requiredVersion(gomod, module)
		assert.ErrorContains(t, err, "requires no "+module, "only require directives are read")
	}
}

func TestWithLines(t *testing.T) {
	gosum := []byte("a.example v1.0.0 h1:a=\nc.example v1.0.0 h1:c=\n")
	got := withLines(gosum, []string{"b.example v1.0.0 h1:b=", "a.example v1.0.0 h1:a=", "d.example v1.0.0/go.mod h1:d="})
	assert.Equal(t, "a.example v1.0.0 h1:a=\nb.example v1.0.0 h1:b=\nc.example v1.0.0 h1:c=\nd.example v1.0.0/go.mod h1:d=\n", string(got))
}

func TestCheckPinned(t *testing.T) {
	gosum := "example.com/m v1.0.0 h1:good=\nexample.com/m v1.0.0/go.mod h1:mod=\n"
	assert.NoError(t, checkPinned(gosum, "example.com/m", "v1.0.0", "h1:good="))
	assert.ErrorContains(t, checkPinned(gosum, "example.com/m", "v1.0.0", "h1:other="), "pins example.com/m@v1.0.0 as h1:good=, but the module cache holds h1:other=")
	assert.ErrorContains(t, checkPinned(gosum, "example.com/m", "v1.1.0", "h1:good="), "does not pin example.com/m@v1.1.0: run go run ./hack/devcluster --tidy-programs")
}

func TestReplaceLineQuotesTheFolder(t *testing.T) {
	assert.Equal(t, `replace example.com/m v1.0.0 => "/cache dir/m"`, replaceLine("example.com/m", "v1.0.0", "/cache dir/m"))
	assert.NotEqual(t, patchedCopy("w", "example.com/a/v2"), patchedCopy("w", "example.com/b/v2"))
}

func TestCopyPatched(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "m.zip")
	writeZip(t, archive, map[string]string{
		"example.com/m@v1.0.0/":            "",
		"example.com/m@v1.0.0/go.mod":      "module example.com/m\n\ngo 1.26.10\n",
		"example.com/m@v1.0.0/srv/main.go": `addr := "0.0.0.0:%d"`,
		"example.com/m@v1.0.0/README":      "hello",
	})
	edits := []sourceEdit{{"srv/main.go", `"0.0.0.0:%d"`, `"127.0.0.1:%d"`}}
	dst := filepath.Join(dir, "copy")
	require.NoError(t, copyPatched("example.com/m@v1.0.0", archive, dst, edits, "1.26.0"))
	for file, want := range map[string]string{"go.mod": "module example.com/m\n\ngo 1.26.0\n", "srv/main.go": `addr := "127.0.0.1:%d"`, "README": "hello"} {
		b, err := os.ReadFile(filepath.Join(dst, file))
		require.NoError(t, err)
		assert.Equal(t, want, string(b), file)
	}

	missing := []sourceEdit{{"srv/gone.go", "a", "b"}}
	assert.ErrorContains(t, copyPatched("example.com/m@v1.0.0", archive, filepath.Join(dir, "copy2"), missing, "1.26.0"), "has no srv/gone.go")

	for name, entry := range map[string]string{"up": "example.com/m@v1.0.0/../../escape", "absolute": "example.com/m@v1.0.0//escape", "another module": "example.com/other@v1.0.0/escape"} {
		evil := filepath.Join(dir, "evil.zip")
		writeZip(t, evil, map[string]string{entry: "x"})
		dst := filepath.Join(dir, "copy3")
		assert.ErrorContains(t, copyPatched("example.com/m@v1.0.0", evil, dst, nil, "1.26.0"), "outside example.com/m@v1.0.0/", name)
		assert.NoFileExists(t, filepath.Join(filepath.Dir(dir), "escape"), name)
		assert.NoFileExists(t, "/escape", name)
		assert.NoDirExists(t, dst, name)
	}
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
