package repocheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/configwave/configwave/"

// The folders under internal/ say whom a package serves; this holds the code to them. A wave
// that links the reloader's pipeline carries fsnotify and the sidecar's code for nothing (it did
// until internal/compat was split), and a production package that imports the test
// environment ships a test's flags (Wave's manager binary prints Ginkgo's).
func TestLayering(t *testing.T) {
	deps := goListDeps(t, module+"...")
	side := func(pkg string) string {
		rest, ok := strings.CutPrefix(pkg, module+"internal/")
		if !ok {
			return ""
		}
		return strings.SplitN(rest, "/", 2)[0]
	}
	for pkg, imports := range deps {
		from := side(pkg)
		for _, dep := range imports {
			to := side(dep)
			switch {
			case from == "reloader" && to == "wave", from == "wave" && to == "reloader":
				t.Errorf("%s imports %s: the reloader's and wave's packages never import each other; move what both need to internal/kube or internal/process", pkg, dep)
			case (from == "kube" || from == "process") && (to == "reloader" || to == "wave"):
				t.Errorf("%s imports %s: the plumbing both binaries use imports neither side", pkg, dep)
			case (from == "reloader" || from == "wave" || from == "kube" || from == "process" || strings.HasPrefix(pkg, module+"cmd/")) && to == "testenv":
				t.Errorf("%s imports %s: production code never imports the test environment", pkg, dep)
			}
		}
	}

	wave := linked(t, module+"cmd/wave")
	for _, dep := range wave {
		assert.False(t, strings.HasPrefix(dep, module+"internal/reloader/"), "cmd/wave links %s, the reloader's", dep)
		assert.NotContains(t, dep, "fsnotify", "cmd/wave links fsnotify (through the reloader's folder source?)")
	}
	require.Contains(t, wave, module+"internal/wave/rollout", "the walk sees wave's own packages")
	reloader := linked(t, module+"cmd/reloader")
	for _, dep := range reloader {
		assert.False(t, strings.HasPrefix(dep, module+"internal/wave/"), "cmd/reloader links %s, wave's", dep)
	}
	require.Contains(t, reloader, module+"internal/reloader/unpack", "the walk sees the reloader's own packages")
	// The file-only build stays as small as configmap-reload: no API client, no Kubernetes
	// parsers, and no web config (YAML, bcrypt), which the full build serves (handOver).
	for _, dep := range linked(t, module+"cmd/reloader", "-tags", "configwave_fileonly") {
		assert.False(t, strings.HasPrefix(dep, "k8s.io/client-go/") || dep == module+"internal/reloader/apisource",
			"the reloader's file-only build links %s, the API client's", dep)
		for _, heavy := range []string{"k8s.io/apimachinery/", "go.yaml.in/", "golang.org/x/crypto/bcrypt", module + "internal/reloader/webconfig"} {
			assert.False(t, strings.HasPrefix(dep, heavy), "the reloader's file-only build links %s", dep)
		}
	}
}

// goListDeps maps each package of the pattern (tests excluded) to the module's packages it
// imports directly.
func goListDeps(t *testing.T, pattern string) map[string][]string {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, pattern).Output()
	require.NoError(t, err, "go list %s", pattern)
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		deps[fields[0]] = nil // every package, with or without imports of ours
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module) {
				deps[fields[0]] = append(deps[fields[0]], imp)
			}
		}
	}
	return deps
}

// linked is every package a binary links, built with flags.
func linked(t *testing.T, pkg string, flags ...string) []string {
	out, err := exec.Command("go", append(append([]string{"list", "-deps"}, flags...), pkg)...).Output()
	require.NoError(t, err, "go list -deps %s", pkg)
	return strings.Fields(string(out))
}

// docs/development.md's layout table names every package under internal/ (a package inside
// another's folder, such as a test double, is its parent's business), and nothing that is gone.
func TestLayoutTableListsEveryPackage(t *testing.T) {
	root := repoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "development.md"))
	require.NoError(t, err)
	listed := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range regexp.MustCompile("`(internal/[^`]+)`").FindAllStringSubmatch(cells[1], -1) {
			listed[m[1]] = true
		}
	}
	dirs := map[string]bool{}
	for pkg := range goListDeps(t, module+"internal/...") {
		dirs[strings.TrimPrefix(pkg, module)] = true
	}
	for dir := range dirs {
		if dirs[filepath.Dir(dir)] {
			continue
		}
		assert.True(t, listed[dir], "docs/development.md's layout table does not list %s: add a row saying what it owns", dir)
	}
	for path := range listed {
		assert.True(t, dirs[path], "docs/development.md's layout table lists %s, which is no package: fix or remove the row", path)
	}
}
