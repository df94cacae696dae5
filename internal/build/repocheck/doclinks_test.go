package repocheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	fence   = regexp.MustCompile("(?ms)^```.*?^```")
)

// slug is GitHub's anchor of a heading: lower case, spaces to hyphens, punctuation dropped.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"From Stakater Reloader":                                   "from-stakater-reloader",
		"From k8s-sidecar (the Grafana chart's dashboard sidecar)": "from-k8s-sidecar-the-grafana-charts-dashboard-sidecar",
		"`wave status`, in detail":                                 "wave-status-in-detail",
	} {
		assert.Equal(t, want, slug(h), h)
	}
}

func anchors(t *testing.T, file string, cache map[string]map[string]bool) map[string]bool {
	if a, ok := cache[file]; ok {
		return a
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	a := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(string(b), ""), -1) {
		a[slug(m[1])] = true
	}
	cache[file] = a
	return a
}

func TestRelativeLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	var files []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return nil
	}))
	require.Greater(t, len(files), 10)
	cache := map[string]map[string]bool{}
	links := 0
	for _, f := range files {
		path := filepath.Join(root, f)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(fence.ReplaceAllString(string(b), ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file, anchor, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), file)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: the link %s leads nowhere", f, target)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") && !anchors(t, dest, cache)[anchor] {
				t.Errorf("%s: the link %s names no heading of %s", f, target, filepath.Base(dest))
			}
		}
	}
	assert.Greater(t, links, 50)
}
