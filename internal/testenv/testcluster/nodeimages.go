package testcluster

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The node has no registry: images are built or read here and imported into containerd, and
// pods use them with imagePullPolicy Never (or IfNotPresent with a tag other than latest).

// ImportImage imports img into the node's containerd under ref (such as localhost/app:node).
func (n *Node) ImportImage(ctx context.Context, img v1.Image, ref string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	archive := filepath.Join(n.dir, "images", filepath.Base(tag.RepositoryStr())+".tar")
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		return err
	}
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		return fmt.Errorf("write image %s: %w", ref, err)
	}
	defer os.Remove(archive)
	if err := n.ctr(ctx, "images", "import", archive); err != nil {
		return fmt.Errorf("import image %s into the node's containerd: %w", ref, err)
	}
	return nil
}

// ImportLayoutImage imports the image tagged tag in the OCI layout at dir (as `make image`
// writes it), for this machine's platform, under ref.
func (n *Node) ImportLayoutImage(ctx context.Context, dir, tag, ref string) error {
	img, err := LayoutImage(dir, tag)
	if err != nil {
		return err
	}
	return n.ImportImage(ctx, img, ref)
}

// LayoutImage reads the image tagged tag in the OCI layout at dir, for this machine's platform.
func LayoutImage(dir, tag string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read the OCI layout %s: %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Annotations["org.opencontainers.image.ref.name"] != tag {
			continue
		}
		if !d.MediaType.IsIndex() {
			return idx.Image(d.Digest)
		}
		platforms, err := idx.ImageIndex(d.Digest)
		if err != nil {
			return nil, err
		}
		pm, err := platforms.IndexManifest()
		if err != nil {
			return nil, err
		}
		for _, p := range pm.Manifests {
			if p.Platform != nil && p.Platform.OS == "linux" && p.Platform.Architecture == runtime.GOARCH {
				return platforms.Image(p.Digest)
			}
		}
		return nil, fmt.Errorf("the OCI layout %s has no linux/%s image tagged %q", dir, runtime.GOARCH, tag)
	}
	return nil, fmt.Errorf("the OCI layout %s has no image tagged %q", dir, tag)
}

// FilesImage is an image of the given files (path in the image → content and mode) that runs
// entrypoint as user.
func FilesImage(files map[string]FileEntry, entrypoint []string, user string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for path := range files {
		for d := filepath.Dir(path); d != "/" && d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if err := tw.WriteHeader(&tar.Header{Name: d[1:] + "/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			return nil, err
		}
	}
	for _, path := range slices.Sorted(maps.Keys(files)) {
		f := files[path]
		if err := tw.WriteHeader(&tar.Header{Name: path[1:], Typeflag: tar.TypeReg, Mode: f.Mode, Size: int64(len(f.Content))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	content := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(content)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = entrypoint
	cf.Config.User = user
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	return mutate.ConfigFile(img, cf)
}

// FileEntry is one file of a FilesImage.
type FileEntry struct {
	Content []byte
	Mode    int64
}

// HostProgramFiles are a dynamically linked program of this machine and the shared libraries
// ldd lists for it, at the same paths: enough to run a Debian package's binary in an image.
func HostProgramFiles(ctx context.Context, program string) (map[string]FileEntry, error) {
	out, err := exec.CommandContext(ctx, "ldd", program).Output()
	if err != nil && !bytes.Contains(out, []byte("not a dynamic executable")) {
		return nil, fmt.Errorf("ldd %s: %w", program, err)
	}
	paths := []string{program}
	for _, line := range bytes.Split(out, []byte("\n")) {
		for _, f := range bytes.Fields(line) {
			if bytes.HasPrefix(f, []byte("/")) {
				paths = append(paths, string(f))
			}
		}
	}
	files := map[string]FileEntry{}
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(real)
		if err != nil {
			return nil, err
		}
		files[p] = FileEntry{Content: b, Mode: 0o755}
	}
	return files, nil
}

// PauseBinary is the sandbox's static binary on the host: mounted into a container (a hostPath
// volume of type File) it is a child process that records the signals it gets (see ./pause).
func (n *Node) PauseBinary() string { return filepath.Join(n.dir, "images", "pause") }

// importPause builds the sandbox image from ./pause and imports it.
func (n *Node) importPause(ctx context.Context) error {
	root, err := RepoRoot(ctx)
	if err != nil {
		return err
	}
	bin := n.PauseBinary()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./internal/testenv/testcluster/pause")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the pause image's binary: %w: %s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	img, err := FilesImage(map[string]FileEntry{"/pause": {Content: b, Mode: 0o755}}, []string{"/pause"}, "65535:65535")
	if err != nil {
		return err
	}
	return n.ImportImage(ctx, img, PauseImage)
}
