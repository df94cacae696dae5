// Command release builds what a configwave release publishes, under one folder: the reloader
// and wave as static binaries for each platform, the Helm chart package, an SPDX SBOM of the
// modules each binary embeds, and SHA256SUMS. The image is built from the Dockerfile
// separately (make image), with a container engine.
//
//	go run ./hack/release --version=v0.1.0 --out=dist
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

var binaries = []string{"reloader", "wave"}

type options struct {
	version   string   // the tag, vX.Y.Z (see CHANGELOG.md)
	out       string   // where the artifacts go; made, and must be empty
	platforms []string // GOOS/GOARCH
	helm      string   // Helm's CLI, for the chart package
	root      string   // the repository
}

func main() {
	var o options
	var platforms string
	flag.StringVar(&o.version, "version", "", "the release's version, a tag vX.Y.Z (default: git describe)")
	flag.StringVar(&o.out, "out", "dist", "folder for the artifacts; made, and must be empty")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated GOOS/GOARCH to build the binaries for")
	flag.StringVar(&o.helm, "helm", envOr("HELM", "helm"), "Helm's CLI, which packages the chart")
	flag.Parse()
	o.platforms = strings.Split(platforms, ",")
	o.root = "."
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if o.version == "" {
		out, err := exec.CommandContext(ctx, "git", "describe", "--tags", "--always", "--dirty").Output()
		if err != nil {
			fail(fmt.Errorf("no --version given, and git describe failed: %w", err))
		}
		o.version = strings.TrimSpace(string(out))
	}
	files, err := run(ctx, o)
	if err != nil {
		fail(err)
	}
	for _, f := range files {
		fmt.Println(filepath.Join(o.out, f))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "release:", err)
	os.Exit(1)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// run builds every artifact into o.out and returns their names, SHA256SUMS last.
func run(ctx context.Context, o options) ([]string, error) {
	chartVersion, err := chartVersionOf(o.version, filepath.Join(o.root, "charts", "configwave", "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(o.out)
	if err != nil {
		return nil, fmt.Errorf("read the output folder: %w", err)
	}
	if len(entries) > 0 {
		return nil, fmt.Errorf("%s must be an empty folder, so that nothing of an earlier release is published with this one: remove it, or give another --out", o.out)
	}
	out, err := filepath.Abs(o.out)
	if err != nil {
		return nil, err
	}
	var files, bins []string
	for _, p := range o.platforms {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || goos == "" || goarch == "" {
			return nil, fmt.Errorf("--platforms: %q is not GOOS/GOARCH", p)
		}
		for _, b := range binaries {
			name := fmt.Sprintf("%s-%s-%s-%s", b, o.version, goos, goarch)
			if err := buildBinary(ctx, o, goos, goarch, b, filepath.Join(out, name)); err != nil {
				return nil, err
			}
			if goos == "linux" { // the image's platform; other systems' binaries are not ELF
				if err := checkStatic(filepath.Join(out, name)); err != nil {
					return nil, err
				}
			}
			files, bins = append(files, name), append(bins, name)
		}
	}
	chart, err := packageChart(ctx, o, chartVersion, out)
	if err != nil {
		return nil, err
	}
	files = append(files, chart)
	sbom := "configwave-" + o.version + ".spdx.json"
	if err := writeSBOM(ctx, o, out, bins, sbom); err != nil {
		return nil, err
	}
	files = append(files, sbom)
	if err := writeSums(out, files, "SHA256SUMS"); err != nil {
		return nil, err
	}
	return append(files, "SHA256SUMS"), nil
}

// buildBinary builds as the Dockerfile does: static, without symbols, paths trimmed, the
// version stamped.
func buildBinary(ctx context.Context, o options, goos, goarch, name, dest string) error {
	// -buildvcs=auto: from a git checkout the commit goes into the binary, and from there into
	// the SBOM, whatever GOFLAGS says; from an archive without .git, nothing does.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=auto", "-ldflags", "-s -w -X main.version="+o.version, "-o", dest, "./cmd/"+name)
	cmd.Dir = o.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s for %s/%s: %w\n%s", name, goos, goarch, err, out)
	}
	return nil
}

// packageChart packages the chart with the release's version; its appVersion, the image tag it
// defaults to, is the version without its v, as the image is tagged.
func packageChart(ctx context.Context, o options, chartVersion, out string) (string, error) {
	cmd := exec.CommandContext(ctx, o.helm, "package", filepath.Join(o.root, "charts", "configwave"),
		"--version", chartVersion, "--app-version", strings.TrimPrefix(o.version, "v"), "--destination", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("the Helm CLI %q is not found: give --helm or set HELM (make release installs it): %w", o.helm, err)
		}
		return "", fmt.Errorf("helm package: %w\n%s", err, b)
	}
	return "configwave-" + chartVersion + ".tgz", nil
}
