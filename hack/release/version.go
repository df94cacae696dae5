package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// semver is SemVer 2.0 without the leading v, as Helm wants a chart version.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// chartVersionOf is the chart's version for a release version: a tag vX.Y.Z[-pre] gives
// X.Y.Z[-pre]; anything else (a build between tags, as git describe names it) is a
// pre-release of the version Chart.yaml holds, X.Y.Z-dev.DESCRIBE, which Helm orders before
// X.Y.Z.
func chartVersionOf(version, chartYAML string) (string, error) {
	if v := strings.TrimPrefix(version, "v"); strings.HasPrefix(version, "v") && semver.MatchString(v) {
		return v, nil
	}
	b, err := os.ReadFile(chartYAML)
	if err != nil {
		return "", fmt.Errorf("read the chart's version: %w", err)
	}
	m := regexp.MustCompile(`(?m)^version:\s*"?([^"\s]+)"?\s*$`).FindSubmatch(b)
	if m == nil || !semver.MatchString(string(m[1])) {
		return "", fmt.Errorf("%s has no SemVer version: line", chartYAML)
	}
	base, _, _ := strings.Cut(string(m[1]), "-")
	base, _, _ = strings.Cut(base, "+")
	suffix := regexp.MustCompile(`[^0-9A-Za-z-]+`).ReplaceAllString(version, ".")
	suffix = strings.Trim(suffix, ".")
	if suffix == "" {
		return "", fmt.Errorf("the version %q names nothing", version)
	}
	return base + "-dev." + suffix, nil
}
