package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// A dirty tree is not released: what is published must be what a commit holds.
func TestReleaseRefusesADirtyTree(t *testing.T) {
	repo := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "x"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		require.NoError(t, cmd.Run())
	}
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "charts", "configwave"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "charts", "configwave", "Chart.yaml"), []byte("version: 0.1.0\n"), 0o644))
	_, err := run(context.Background(), options{version: "v0.1.0", out: t.TempDir(), platforms: []string{"linux/amd64"}, root: repo})
	assert.ErrorContains(t, err, "the tree has uncommitted changes")
}

func TestFileVersion(t *testing.T) {
	assert.Equal(t, "release-v1.2.3", fileVersion("release/v1.2.3"))
	assert.Equal(t, "v1.2.3", fileVersion("v1.2.3"))
}

func TestChartVersionOf(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "Chart.yaml")
	require.NoError(t, os.WriteFile(chart, []byte("apiVersion: v2\nname: x\nversion: 0.2.0\nappVersion: \"0.2.0\"\n"), 0o644))
	for version, want := range map[string]string{
		"v0.1.0":                  "0.1.0",
		"v1.2.3-rc.1":             "1.2.3-rc.1",
		"v0.1.0-3-g3431252-dirty": "0.1.1-dev.3.g3431252.dirty", // after v0.1.0, before v0.1.1
		"v0.9.7-12-gabc1234":      "0.9.8-dev.12.gabc1234",
		"3431252":                 "0.2.0-dev.3431252",
		"3431252-dirty":           "0.2.0-dev.3431252-dirty",
		"release/candidate one":   "0.2.0-dev.release.candidate.one",
		"v1.2":                    "0.2.0-dev.v1.2",
	} {
		got, err := chartVersionOf(version, chart)
		require.NoError(t, err, version)
		assert.Equal(t, want, got, version)
		assert.Regexp(t, semver, got)
	}
	_, err := chartVersionOf("3431252", filepath.Join(t.TempDir(), "missing.yaml"))
	assert.ErrorContains(t, err, "read the chart's version")
}

// What a release publishes, built for this machine's platform as `make release` builds it for
// every platform: static binaries that say their version, a chart package of that version, an
// SBOM of exactly what each binary embeds, and checksums that match. The version differs from
// Chart.yaml's, so that a chart packaged without it would show.
func TestReleaseForThisPlatform(t *testing.T) {
	helm := testcluster.Helm(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	platform := runtime.GOOS + "/" + runtime.GOARCH
	files, err := run(ctx, options{version: "v0.9.7", out: out, platforms: []string{platform}, helm: helm, root: root, allowDirty: true})
	require.NoError(t, err)
	suffix := "-v0.9.7-" + runtime.GOOS + "-" + runtime.GOARCH
	image := "configwave-v0.9.7-image.oci.tar"
	assert.Equal(t, []string{"reloader" + suffix, "reloader-fileonly" + suffix, "wave" + suffix, "kubectl-configwave" + suffix, image, "kubectl-configwave" + suffix + ".tar.gz", "configwave.krew.yaml", "configwave-0.9.7.tgz", "configwave-v0.9.7.spdx.json", "SHA256SUMS"}, files)

	for _, b := range binaries {
		path := filepath.Join(out, b+suffix)
		f, err := elf.Open(path)
		require.NoError(t, err)
		for _, p := range f.Progs {
			assert.NotEqual(t, elf.PT_INTERP, p.Type, "%s is static", b)
		}
		_ = f.Close()
		version, err := exec.Command(path, "--version").Output()
		require.NoError(t, err)
		assert.Equal(t, strings.TrimSuffix(b, "-fileonly")+" v0.9.7\n", string(version), "the file-only build is the reloader")
	}

	sums, err := os.Open(filepath.Join(out, "SHA256SUMS"))
	require.NoError(t, err)
	defer sums.Close()
	listed := 0
	for sc := bufio.NewScanner(sums); sc.Scan(); listed++ {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		require.True(t, ok, sc.Text())
		got, err := sha256File(filepath.Join(out, name))
		require.NoError(t, err)
		assert.Equal(t, got, sum, name)
	}
	assert.Equal(t, len(files)-1, listed, "every file but SHA256SUMS itself")

	// krew's manifest names the archive by its release address and its checksum, and the
	// archive holds the plugin as krew runs it.
	var plugin krewPlugin
	kb, err := os.ReadFile(filepath.Join(out, "configwave.krew.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(kb, &plugin))
	require.Len(t, plugin.Spec.Platforms, 1)
	archive := "kubectl-configwave" + suffix + ".tar.gz"
	sum, err := sha256File(filepath.Join(out, archive))
	require.NoError(t, err)
	assert.Equal(t, sum, plugin.Spec.Platforms[0].Sha256)
	assert.Equal(t, "https://github.com/configwave/configwave/releases/download/v0.9.7/"+archive, plugin.Spec.Platforms[0].URI)
	assert.Equal(t, map[string]string{"os": runtime.GOOS, "arch": runtime.GOARCH}, plugin.Spec.Platforms[0].Selector["matchLabels"])
	assert.Equal(t, "v0.9.7", plugin.Spec.Version)
	unpacked := t.TempDir()
	tarOut, err := exec.Command("tar", "-xzf", filepath.Join(out, archive), "-C", unpacked).CombinedOutput()
	require.NoError(t, err, string(tarOut))
	version, err := exec.Command(filepath.Join(unpacked, plugin.Spec.Platforms[0].Bin), "--version").Output()
	require.NoError(t, err)
	assert.Equal(t, "kubectl-configwave v0.9.7\n", string(version))
	assert.FileExists(t, filepath.Join(unpacked, "LICENSE"))

	var doc spdxDocument
	b, err := os.ReadFile(filepath.Join(out, "configwave-v0.9.7.spdx.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &doc))
	assert.Equal(t, "SPDX-2.3", doc.SPDXVersion)
	ids := map[string]spdxPackage{}
	versions := map[string]string{}
	for _, p := range doc.Packages {
		ids[p.SPDXID] = p
		versions[p.Name] = p.VersionInfo
	}
	for _, r := range doc.Relationships {
		assert.True(t, r.Element == "SPDXRef-DOCUMENT" || ids[r.Element].Name != "", "relationship from %s", r.Element)
		assert.NotEmpty(t, ids[r.Related].Name, "relationship to %s", r.Related)
	}
	clientGo, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "k8s.io/client-go").Output()
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(clientGo)), versions["k8s.io/client-go"], "the module the binaries link, at go.mod's version")
	assert.Equal(t, strings.TrimPrefix(runtime.Version(), "go"), versions["stdlib"])
	assert.NotContains(t, versions, "github.com/stretchr/testify", "a test-only module is not in the binaries, so not in their SBOM")
	for _, bin := range binaries {
		p := ids[spdxID("Package", bin+suffix)]
		sum, err := sha256File(filepath.Join(out, bin+suffix))
		require.NoError(t, err)
		require.Len(t, p.Checksums, 1, bin)
		assert.Equal(t, sum, p.Checksums[0].ChecksumValue, bin)
	}

	// The images: the archive holds both, each described in the SBOM by its digest, containing
	// the binaries.
	tags := map[string]string{}
	for _, p := range doc.Packages {
		if tag, ok := strings.CutPrefix(p.Name, "configwave "); ok && p.PrimaryPackagePurpose == "CONTAINER" {
			tags[strings.TrimSuffix(tag, " image")] = p.Checksums[0].ChecksumValue
		}
	}
	assert.Len(t, tags, 2, "the reloader and wave images")
	if skopeo, err := exec.LookPath("skopeo"); err == nil {
		for tag, sum := range tags {
			out, err := exec.Command(skopeo, "inspect", "--raw", "oci-archive:"+filepath.Join(out, image)+":"+tag).Output()
			require.NoError(t, err, tag)
			assert.Equal(t, sum, sha256Hex(out), "the SBOM names the %s image by its digest", tag)
		}
	} else if os.Getenv("CI") == "true" {
		t.Fatal("skopeo is not on PATH: install Debian's skopeo package (.ci/run does)")
	}

	chart := filepath.Join(out, "configwave-0.9.7.tgz")
	show, err := exec.Command(helm, "show", "chart", chart).Output()
	require.NoError(t, err)
	assert.Contains(t, string(show), "\nversion: 0.9.7\n")
	assert.Contains(t, string(show), "appVersion: 0.9.7\n")
	rendered, err := exec.Command(helm, "template", "x", chart).Output()
	require.NoError(t, err)
	assert.Contains(t, string(rendered), `image: "ghcr.io/configwave/configwave:0.9.7"`, "the image tag the chart defaults to is the release's")

	_, err = run(ctx, options{version: "v0.9.7", out: out, platforms: []string{platform}, helm: helm, root: root, allowDirty: true})
	assert.ErrorContains(t, err, "must be an empty folder", "nothing of an earlier release is published with another")
}

func sha256Hex(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }
