package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/process/startup"
)

var update = flag.Bool("update", false, "rewrite docs/wave-flags.md from the flags (make docs)")

// The flags reference is generated from the binary's own --help, so it cannot go stale:
// this test fails when they differ; `make docs` rewrites it.
func TestFlagsDocIsCurrent(t *testing.T) {
	var o options
	var so statusOptions
	want := startup.FlagsDoc("wave", newFlagSet(&o)) + "\n" + strings.Replace(startup.FlagsDoc("wave status", newStatusFlagSet(&so)),
		"# `wave status` flags\n\nGenerated from `wave status --help` by `make docs`; a test fails when it is stale.\n", "## `wave status`\n", 1)
	path := filepath.Join("..", "..", "docs", "wave-flags.md")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err, "run make docs")
	assert.Equal(t, want, string(got), "docs/wave-flags.md is stale: run make docs")
}
