package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/process/startup"
)

var update = flag.Bool("update", false, "rewrite docs/reloader-flags.md from the flags (make docs)")

// The flags reference is generated from the binary's own --help, so it cannot go stale:
// this test fails when they differ; `make docs` rewrites it.
func TestFlagsDocIsCurrent(t *testing.T) {
	want := startup.FlagsDoc("reloader", newCommandLine().fs)
	path := filepath.Join("..", "..", "docs", "reloader-flags.md")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err, "run make docs")
	assert.Equal(t, want, string(got), "docs/reloader-flags.md is stale: run make docs")
}
