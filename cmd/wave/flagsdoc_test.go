package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite docs/wave-flags.md from the flags (make docs)")

// The flags reference is generated from the binary's own --help, so it cannot go stale:
// this test fails when they differ; `make docs` rewrites it.
func TestFlagsDocIsCurrent(t *testing.T) {
	var o options
	fs := newFlagSet(&o)
	var help bytes.Buffer
	fs.SetOutput(&help)
	fs.Usage()
	want := "# `wave` flags\n\nGenerated from `wave --help` by `make docs`; a test fails when it is stale.\n\n```text\n" + help.String() + "```\n"
	path := filepath.Join("..", "..", "docs", "wave-flags.md")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err, "run make docs")
	assert.Equal(t, want, string(got), "docs/wave-flags.md is stale: run make docs")
}
