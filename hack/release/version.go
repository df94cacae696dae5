package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// describeAfterTag is git describe's name of a commit after a release tag: vX.Y.Z-N-gHASH, and
// -dirty for a tree with changes.
var describeAfterTag = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)-(\d+-g[0-9a-f]+(?:-dirty)?)$`)

// fileVersion is the version as it goes into a file name: a tag may hold a "/" (release/v1),
// which would make a folder of it.
func fileVersion(v string) string { return strings.NewReplacer("/", "-", "\\", "-").Replace(v) }

// semver is SemVer 2.0 without the leading v, as Helm wants a chart version.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// chartVersionOf is the chart's version for a release version: a tag vX.Y.Z[-pre] gives
// X.Y.Z[-pre]; a build after a tag, as git describe names it (vX.Y.Z-N-gHASH[-dirty]), is a
// pre-release of the next patch, X.Y.(Z+1)-dev.N.gHASH, which Helm orders after the tag it
// follows and before the next; anything else is a pre-release of the version Chart.yaml holds,
// X.Y.Z-dev.DESCRIBE.
func chartVersionOf(version, chartYAML string) (string, error) {
	if m := describeAfterTag.FindStringSubmatch(version); m != nil {
		patch, _ := strconv.Atoi(m[3])
		return fmt.Sprintf("%s.%s.%d-dev.%s", m[1], m[2], patch+1, strings.ReplaceAll(m[4], "-", ".")), nil
	}
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
