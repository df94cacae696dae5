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

// maxBenchFunctionLines bounds a function of `make bench`: a measurement longer than a screen
// mixes its set-up, its loop and its report, and a reader cannot see what it times.
const maxBenchFunctionLines = 100

func TestBenchFunctionsAreShort(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "bench", "*.go"))
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
			assert.LessOrEqual(t, lines, maxBenchFunctionLines, "%s: %s is %d lines: split it along its seams (set-up, loop, report)", filepath.Base(f), fn.Name.Name, lines)
		}
	}
}
