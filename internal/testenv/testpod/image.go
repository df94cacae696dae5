package testpod

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/configwave/configwave/internal/build/gobuild"
	"github.com/configwave/configwave/internal/build/ociimage"
	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// Version is the version the test images' binaries say.
const Version = "v0.0.0-image-test"

// Need checks what running a pod here takes: root, runc, umoci, skopeo and ip. Without one,
// the test says so in one line and skips, or fails under CI=true.
func Need(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs containers; skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		msg := "runs containers with runc, which needs root here"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	for prog, pkg := range map[string]string{"runc": "runc", "umoci": "umoci", "skopeo": "skopeo", "ip": "iproute2"} {
		testcluster.NeedProgram(t, prog, pkg)
	}
}

var (
	workOnce sync.Once
	workDir  string
	workErr  error

	layoutOnce sync.Once
	layoutDir  string
	layoutErr  error

	unpacked sync.Map // tag → *Image
	unpackMu sync.Mutex
)

// work is this test binary's folder for images and bundles, removed by Cleanup.
func work() (string, error) {
	workOnce.Do(func() { workDir, workErr = os.MkdirTemp("", "configwave-testpod-") })
	return workDir, workErr
}

// Cleanup removes what the package made for the whole test binary; call it from TestMain after
// the tests ran.
func Cleanup() {
	if workDir != "" {
		_ = os.RemoveAll(workDir)
	}
}

// Layout builds the images for this machine's platform, as `make image` builds them for every
// platform (the same binaries, layers and config), once per test binary, and returns the OCI
// layout's folder.
func Layout(t testing.TB) string {
	t.Helper()
	layoutOnce.Do(func() {
		dir, err := work()
		if err != nil {
			layoutErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		layoutDir, layoutErr = WriteLayout(ctx, dir)
	})
	if layoutErr != nil {
		t.Fatalf("build the images: %v", layoutErr)
	}
	return layoutDir
}

// WriteLayout builds the binaries under dir/bin and the images for this machine's platform as
// an OCI layout under dir/layout, whose folder it returns: for a program that is not a test
// (`make demo`), which keeps the layout as long as it needs it.
func WriteLayout(ctx context.Context, dir string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	p := ociimage.Platform{OS: "linux", Arch: runtime.GOARCH, Binaries: map[string]string{}}
	for _, b := range ociimage.Binaries {
		dest := filepath.Join(dir, "bin", b)
		if err := gobuild.Binary(ctx, gobuild.Target{Root: root, OS: p.OS, Arch: p.Arch, Version: Version}, b, dest); err != nil {
			return "", err
		}
		p.Binaries[b] = dest
	}
	layout := filepath.Join(dir, "layout")
	build := ociimage.Build{Platforms: []ociimage.Platform{p}, Version: Version, Revision: gobuild.Revision(ctx, root), Created: gobuild.CommitTime(ctx, root)}
	if err := build.WriteLayout(layout); err != nil {
		return "", err
	}
	return layout, nil
}

// repoRoot is the folder of the module's go.mod.
func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := string(out[:len(out)-1])
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the module")
	}
	return filepath.Dir(mod), nil
}

// Image is one image unpacked as a node's runtime unpacks it: copied out of the layout for this
// machine's platform by skopeo, its layers applied by umoci. Its root is shared, read-only, by
// the containers that run it.
type Image struct {
	Tag    string
	Rootfs string
	Config v1.Config      // what the image says: entrypoint, cmd, env, user, working dir
	spec   map[string]any // umoci's runtime config for it, the base of each container's
}

// Unpack unpacks the image tagged tag from the layout, once per test binary.
func Unpack(t testing.TB, layout, tag string) *Image {
	t.Helper()
	unpackMu.Lock()
	defer unpackMu.Unlock()
	if im, ok := unpacked.Load(tag); ok {
		return im.(*Image)
	}
	dir, err := work()
	if err != nil {
		t.Fatal(err)
	}
	single := filepath.Join(dir, "single-"+tag)
	bundle := filepath.Join(dir, "image-"+tag)
	// skopeo picks this machine's platform out of the multi-platform index, as a node pulls.
	if out, err := exec.Command("skopeo", "copy", "--quiet", "oci:"+layout+":"+tag, "oci:"+single+":"+tag).CombinedOutput(); err != nil {
		t.Fatalf("skopeo copy the %s image out of the layout: %v: %s", tag, err, out)
	}
	if out, err := exec.Command("umoci", "unpack", "--image", single+":"+tag, bundle).CombinedOutput(); err != nil {
		t.Fatalf("umoci unpack the %s image: %v: %s", tag, err, out)
	}
	im := &Image{Tag: tag, Rootfs: filepath.Join(bundle, "rootfs")}
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &im.spec); err != nil {
		t.Fatalf("umoci's runtime config: %v", err)
	}
	out, err := exec.Command("skopeo", "inspect", "--config", "oci:"+single+":"+tag).Output()
	if err != nil {
		t.Fatalf("skopeo inspect the %s image's config: %v", tag, err)
	}
	var cf v1.ConfigFile
	if err := json.Unmarshal(out, &cf); err != nil {
		t.Fatalf("the %s image's config: %v", tag, err)
	}
	im.Config = cf.Config
	unpacked.Store(tag, im)
	return im
}
