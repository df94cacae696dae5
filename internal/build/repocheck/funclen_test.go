package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxFunctionLines bounds a function of the folders below: a measurement of `make bench`
// longer than a screen mixes its set-up, its loop and its report, and a reader cannot see what
// it times; wave's rollout controller keeps its decisions in the pure plan, and a gathering or
// applying function past a screen is where a decision hides.
const maxFunctionLines = 100

func TestFunctionsAreShort(t *testing.T) {
	for _, dir := range []string{"bench", filepath.Join("internal", "wave", "rollout")} {
		t.Run(dir, func(t *testing.T) { functionsAreShort(t, dir) })
	}
}

func functionsAreShort(t *testing.T, dir string) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), dir, "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			assert.LessOrEqual(t, lines, maxFunctionLines, "%s: %s is %d lines: split it along its seams (set-up, loop, report; gather, decide, apply)", filepath.Join(dir, filepath.Base(f)), fn.Name.Name, lines)
		}
	}
}
