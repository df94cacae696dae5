package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/configwave/configwave/internal/build/gobuild"
	"github.com/configwave/configwave/internal/build/ociimage"
)

// imageBuild is the image build of the binaries in platforms, dated and labelled by the commit.
func imageBuild(ctx context.Context, o options, platforms []ociimage.Platform) ociimage.Build {
	return ociimage.Build{Platforms: platforms, Version: o.version, Revision: gobuild.Revision(ctx, o.root), Created: gobuild.CommitTime(ctx, o.root)}
}

// writeImageArchive writes the images as one oci-archive at dest and returns each image's
// digest by tag.
func writeImageArchive(ctx context.Context, o options, platforms []ociimage.Platform, dest string) (map[string]string, error) {
	tmp, err := os.MkdirTemp("", "configwave-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	b := imageBuild(ctx, o, platforms)
	dir := filepath.Join(tmp, "layout")
	if err := b.WriteLayout(dir); err != nil {
		return nil, err
	}
	digests, err := layoutDigests(dir)
	if err != nil {
		return nil, err
	}
	f, err := os.Create(dest)
	if err != nil {
		return nil, err
	}
	if err := ociimage.WriteArchive(dir, f, b.Created.Unix()); err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", dest, err)
	}
	return digests, f.Close()
}

// layoutDigests reads the digest of each tagged image of an OCI layout.
func layoutDigests(dir string) (map[string]string, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, d := range m.Manifests {
		out[d.Annotations[ociimage.RefName]] = d.Digest.String()
	}
	return out, nil
}

// imageOnly builds the binaries into a temporary folder and writes the images alone, as an OCI
// layout into o.out (make image).
func imageOnly(ctx context.Context, o options) ([]string, error) {
	tmp, err := os.MkdirTemp("", "configwave-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	platforms, err := buildBinaries(ctx, o, tmp, func(b, goos, goarch string) string { return b + "-" + goos + "-" + goarch })
	if err != nil {
		return nil, err
	}
	if err := imageBuild(ctx, o, platforms).WriteLayout(o.out); err != nil {
		return nil, err
	}
	digests, err := layoutDigests(o.out)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, im := range ociimage.Images {
		out = append(out, fmt.Sprintf("oci:%s:%s (%s)", o.out, im.Tag, digests[im.Tag]))
	}
	return out, nil
}

// writeRootfs writes one image's tree for this machine's platform into dir: what the Dockerfile
// copies, built from the same code as the layers.
func writeRootfs(ctx context.Context, o options, dir string) error {
	goos, goarch := envOr("GOOS", runtime.GOOS), envOr("GOARCH", runtime.GOARCH)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "configwave-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	o.platforms = []string{goos + "/" + goarch}
	platforms, err := buildBinaries(ctx, o, tmp, func(b, _, _ string) string { return b })
	if err != nil {
		return err
	}
	return ociimage.WriteRootfs(dir, platforms[0])
}
