package repocheck

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the README's figures from bench/results.json")

var root = filepath.Join("..", "..", "..")

// The README quotes exactly what the last `make bench` measured.
func TestReadmeFiguresMatchResults(t *testing.T) {
	r, err := LoadFigures(filepath.Join(root, "bench", "results.json"))
	require.NoError(t, err)
	readme := filepath.Join(root, "README.md")
	doc, err := os.ReadFile(readme)
	require.NoError(t, err)
	if r.Mode == "full" {
		// A full run measures every section: one missing here is a key bench/report.go
		// renamed, which would drop a figure from the README without a word.
		assert.True(t, r.Propagation != nil && r.Burst != nil && r.Footprint != nil && r.Folders != nil && r.Shared != nil &&
			r.Coalescing != nil && r.Runaway != nil && len(r.WaveLatency) > 0 && len(r.Memory) > 1 && len(r.Scale) > 0,
			"bench/results.json from a full run lacks a section the README quotes")
	}
	want := FiguresMarkdown(r)
	if *update {
		out, err := RewriteFigures(doc, want)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(readme, out, 0o644))
		return
	}
	got, err := CurrentFigures(doc)
	require.NoError(t, err)
	assert.Equal(t, want, got, "README.md's figures differ from bench/results.json: run make docs")
}

func TestFiguresMarkdown(t *testing.T) {
	var r Results
	r.Command = "make bench"
	empty := FiguresMarkdown(r)
	assert.Contains(t, empty, "| what | measured (median) | against, in the same run |")
	assert.Equal(t, 2, strings.Count(empty, "\n|"), "a run that measured nothing quotes nothing")

	r.Propagation = &Propagation{Floor: Stats{Median: 8}, HTTP: Stats{Median: 9}, DefaultHTTP: Stats{Median: 10}}
	out := FiguresMarkdown(r)
	assert.Contains(t, out, "| 10.0 ms | a bare watch in a process of its own, 8.0 ms: 1.25× |")
	assert.Contains(t, out, "| 9.0 ms | 1.12× the bare watch |")
	assert.NotContains(t, out, "wave:", "no wave figure without wave's measurements")

	r.Shared = &Shared{Deployments: 1000, QPS: 200, UntilLast: Stats{Median: 5200}, Floor: Stats{Median: 5000}}
	assert.Contains(t, FiguresMarkdown(r), "| 5.2 s | a bare loop of the same PATCHes at the same QPS, 5.0 s: 1.04× |", "no spread where the run measured none")
	r.Shared.RatioMin, r.Shared.RatioMax = 0.98, 1.09
	assert.Contains(t, FiguresMarkdown(r), "5.0 s: 1.04× (each change: 0.98–1.09×) |")
	r.Shared = nil

	r.RealPods = &RealPods{LeftOut: "a real node needs root"}
	assert.NotContains(t, FiguresMarkdown(r), "real pod", "a step left out quotes nothing")
	r.RealPods = &RealPods{Kubelet: Stats{Median: 900}, Reloader: Stats{Median: 907}, ReloaderShare: Stats{Median: 7},
		ConfigmapReloadKub: Stats{Median: 901}, ConfigmapReload: Stats{N: 5, Median: 906}, ConfigmapReloadShare: Stats{Median: 6}, API: Stats{Median: 18},
		DefaultChanges: 5, DefaultReloader: Stats{Median: 71740}, DefaultAPI: Stats{Median: 20}}
	out = FiguresMarkdown(r)
	assert.Contains(t, out, "| 907.0 ms, 7.0 ms after kubelet's file | kubelet's update of the file in that pod, 900.0 ms; configmap-reload 906.0 ms, 6.0 ms after kubelet's file (901.0 ms) in its pod |")
	assert.Contains(t, out, "| 71.7 s | through the API: 20.0 ms |")
}

func TestRewriteFigures(t *testing.T) {
	doc := []byte("# x\n\n" + Begin + "\nold\n" + End + "\n\nafter\n")
	out, err := RewriteFigures(doc, "new\n")
	require.NoError(t, err)
	assert.Equal(t, "# x\n\n"+Begin+"\nnew\n"+End+"\n\nafter\n", string(out))
	got, err := CurrentFigures(out)
	require.NoError(t, err)
	assert.Equal(t, "new\n", got)
	_, err = RewriteFigures([]byte("no markers"), "new\n")
	assert.Error(t, err)
	_, err = CurrentFigures([]byte(End + Begin))
	assert.Error(t, err)
}
