// Command release builds what a configwave release publishes, under one folder: the reloader,
// wave and the kubectl plugin as static binaries for each platform (the plugin also as an
// archive per platform with its krew manifest), the images (an OCI layout of both, for every
// platform, as one oci-archive), the Helm chart package, an SPDX SBOM of the modules each
// binary embeds and of the images, and SHA256SUMS.
//
//	go run ./hack/release --version=v0.1.0 --out=dist
//	go run ./hack/release --image-only --out=dist/image     # make image: the OCI layout alone
//	go run ./hack/release --rootfs=/rootfs                  # the Dockerfile: one image's tree
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

	"github.com/configwave/configwave/internal/build/gobuild"
	"github.com/configwave/configwave/internal/build/ociimage"
)

var binaries = ociimage.Binaries

type options struct {
	version   string   // the tag, vX.Y.Z (see CHANGELOG.md)
	out       string   // where the artifacts go; made, and must be empty
	platforms []string // GOOS/GOARCH
	helm      string   // Helm's CLI, for the chart package
	root      string   // the repository
	imageOnly bool     // the OCI layout alone, into out
	// allowDirty releases a tree with uncommitted changes (a test's, or --allow-dirty): what
	// is published must be what a commit holds, or nobody can build it again.
	allowDirty bool
}

func main() {
	var o options
	var platforms string
	flag.StringVar(&o.version, "version", "", "the release's version, a tag vX.Y.Z (default: git describe)")
	flag.StringVar(&o.out, "out", "dist", "folder for the artifacts; made, and must be empty")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated GOOS/GOARCH to build the binaries for")
	flag.StringVar(&o.helm, "helm", envOr("HELM", "helm"), "Helm's CLI, which packages the chart")
	flag.BoolVar(&o.imageOnly, "image-only", false, "write only the images, as an OCI layout into --out (make image)")
	flag.BoolVar(&o.allowDirty, "allow-dirty", false, "release a tree with uncommitted changes (never for a published release)")
	rootfs := flag.String("rootfs", "", "write the tree of an image for this machine's platform (GOOS, GOARCH) into this folder and stop (the Dockerfile)")
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
	if *rootfs != "" {
		if err := writeRootfs(ctx, o, *rootfs); err != nil {
			fail(err)
		}
		return
	}
	run := run
	if o.imageOnly {
		run = imageOnly
	}
	files, err := run(ctx, o)
	if err != nil {
		fail(err)
	}
	for _, f := range files {
		if !o.imageOnly {
			f = filepath.Join(o.out, f)
		}
		fmt.Println(f)
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
	if rev := gobuild.Revision(ctx, o.root); strings.HasSuffix(rev, "-dirty") && !o.allowDirty {
		return nil, fmt.Errorf("the tree has uncommitted changes (git status): a release is what a commit holds; commit or stash them, or give --allow-dirty for a build that is not published")
	}
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
	platforms, err := buildBinaries(ctx, o, out, func(b, goos, goarch string) string {
		return fmt.Sprintf("%s-%s-%s-%s", b, fileVersion(o.version), goos, goarch)
	})
	if err != nil {
		return nil, err
	}
	var files, bins []string
	for _, p := range platforms {
		for _, b := range binaries {
			name := filepath.Base(p.Binaries[b])
			files, bins = append(files, name), append(bins, name)
		}
	}
	image := "configwave-" + fileVersion(o.version) + "-image.oci.tar"
	digests, err := writeImageArchive(ctx, o, platforms, filepath.Join(out, image))
	if err != nil {
		return nil, err
	}
	files = append(files, image)
	krew, err := writeKrew(o, out, platforms, gobuild.CommitTime(ctx, o.root))
	if err != nil {
		return nil, err
	}
	files = append(files, krew...)
	chart, err := packageChart(ctx, o, chartVersion, out)
	if err != nil {
		return nil, err
	}
	files = append(files, chart)
	sbom := "configwave-" + fileVersion(o.version) + ".spdx.json"
	if err := writeSBOM(ctx, o, out, bins, imageSBOM{file: image, digests: digests}, sbom); err != nil {
		return nil, err
	}
	files = append(files, sbom)
	if err := writeSums(out, files, "SHA256SUMS"); err != nil {
		return nil, err
	}
	return append(files, "SHA256SUMS"), nil
}

// buildBinaries builds every binary for every platform into dir, named by name.
func buildBinaries(ctx context.Context, o options, dir string, name func(bin, goos, goarch string) string) ([]ociimage.Platform, error) {
	var out []ociimage.Platform
	for _, p := range o.platforms {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || goos == "" || goarch == "" {
			return nil, fmt.Errorf("--platforms: %q is not GOOS/GOARCH", p)
		}
		plat := ociimage.Platform{OS: goos, Arch: goarch, Binaries: map[string]string{}}
		for _, b := range binaries {
			dest := filepath.Join(dir, name(b, goos, goarch))
			if err := gobuild.Binary(ctx, gobuild.Target{Root: o.root, OS: goos, Arch: goarch, Version: o.version}, b, dest); err != nil {
				return nil, err
			}
			if goos == "linux" { // the image's platform; other systems' binaries are not ELF
				if err := gobuild.CheckStatic(dest); err != nil {
					return nil, err
				}
			}
			plat.Binaries[b] = dest
		}
		out = append(out, plat)
	}
	return out, nil
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
