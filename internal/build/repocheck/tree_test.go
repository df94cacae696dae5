package repocheck

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxTrackedSize: anything larger is a built program or a data dump, not source. The largest
// file we keep (docs/benchmarks.md) is about 60 KB.
const maxTrackedSize = 1 << 20

// A built program committed once (a 41 MB demo binary) stays in every clone for ever; this
// catches the next one before it lands.
func TestTreeHoldsNoBuiltProgram(t *testing.T) {
	root := repoRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	require.NoError(t, err, "git ls-files")
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		path := filepath.Join(root, name)
		info, err := os.Lstat(path)
		if err != nil || !info.Mode().IsRegular() {
			continue // removed in the work tree, or a symlink
		}
		assert.LessOrEqual(t, info.Size(), int64(maxTrackedSize), "%s is tracked and over 1 MiB: git rm --cached it and ignore it", name)
		head := make([]byte, 4)
		if f, err := os.Open(path); err == nil {
			_, _ = f.Read(head)
			_ = f.Close()
		}
		assert.False(t, bytes.Equal(head, []byte("\x7fELF")), "%s is a tracked program: git rm --cached it and ignore it", name)
	}
}

// `go build ./cmd/wave` (or ./hack/demo) in the top folder writes a program named after the
// package's folder there: git must ignore each, and the Docker build context must leave it out.
func TestBuiltProgramsAreIgnored(t *testing.T) {
	root := repoRoot(t)
	dockerignore, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	require.NoError(t, err)
	ignoredByDocker := map[string]bool{}
	for _, line := range strings.Split(string(dockerignore), "\n") {
		ignoredByDocker[strings.Trim(strings.TrimSpace(line), "/")] = true
	}
	programs := mainPackages(t, root, "cmd", "hack")
	require.Contains(t, programs, "demo", "the walk found the main packages")
	for _, name := range programs {
		err := exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", name).Run()
		assert.NoError(t, err, "a program built as ./%s is not ignored by .gitignore: add /%s", name, name)
		assert.True(t, ignoredByDocker[name], "a program built as ./%s would enter the Docker build context: add %s to .dockerignore", name, name)
	}
}

// mainPackages returns the folder names of this module's main packages under dirs.
func mainPackages(t *testing.T, root string, dirs ...string) []string {
	seen := map[string]bool{}
	var names []string
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // a module of its own: not built from the top folder
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			name := filepath.Base(filepath.Dir(path))
			if bytes.HasPrefix(src, []byte("package main\n")) || bytes.Contains(src, []byte("\npackage main\n")) {
				if !seen[name] {
					seen[name] = true
					names = append(names, name)
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
	return names
}

func repoRoot(t *testing.T) string {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	require.NoError(t, err, "the tests of the tree run in a git clone")
	return strings.TrimSpace(string(out))
}
