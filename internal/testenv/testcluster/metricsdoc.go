package testcluster

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// DocumentedMetrics returns the series the metrics reference (docs/metrics.md, at path) lists
// for binary ("reloader", "wave"; "both" rows count for each): the names in its first column,
// without their labels.
func DocumentedMetrics(path, binary string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the metrics reference: %w", err)
	}
	name := regexp.MustCompile("`([a-z_]+)")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| `") || len(cells) < 3 {
			continue
		}
		if who := strings.TrimSpace(cells[1]); who != binary && who != "both" {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cells[0], -1) {
			out = append(out, m[1])
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s lists no series for %s", path, binary)
	}
	return out, nil
}

// MetricNames returns the names of the series p exports on /metrics (from its # TYPE lines).
func (p *Process) MetricNames() map[string]bool {
	_, body := p.Get("/metrics")
	names := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			n, _, _ := strings.Cut(rest, " ")
			names[n] = true
		}
	}
	return names
}
