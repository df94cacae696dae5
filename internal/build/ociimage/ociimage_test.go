package ociimage

import (
	"bufio"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// fakeBuild is a build of small stand-in binaries: the packing is what is under test here; the
// real binaries are run from the image in internal/testenv/dropin.
func fakeBuild(t *testing.T, created time.Time) Build {
	t.Helper()
	dir := t.TempDir()
	var platforms []Platform
	for _, arch := range []string{"amd64", "arm64"} {
		p := Platform{OS: "linux", Arch: arch, Binaries: map[string]string{}}
		for _, b := range Binaries {
			path := filepath.Join(dir, b+"-"+arch)
			require.NoError(t, os.WriteFile(path, []byte("#!/bin/false\n"+b+" "+arch+"\n"), 0o755))
			p.Binaries[b] = path
		}
		platforms = append(platforms, p)
	}
	return Build{Platforms: platforms, Version: "v1.2.3", Revision: "0123456789abcdef0123456789abcdef01234567", Created: created}
}

// The same inputs give the same digests, whenever and wherever they are built.
func TestBuildIsReproducible(t *testing.T) {
	created := time.Date(2026, 11, 25, 19, 34, 50, 0, time.UTC)
	digests := func(b Build) map[string]string {
		dir := filepath.Join(t.TempDir(), "layout")
		require.NoError(t, b.WriteLayout(dir))
		idx, err := layout.ImageIndexFromPath(dir)
		require.NoError(t, err)
		m, err := idx.IndexManifest()
		require.NoError(t, err)
		out := map[string]string{}
		for _, d := range m.Manifests {
			out[d.Annotations[RefName]] = d.Digest.String()
		}
		return out
	}
	first := digests(fakeBuild(t, created))
	require.Len(t, first, 2)
	assert.Equal(t, first, digests(fakeBuild(t, created)), "same inputs, same digests")
	assert.NotEqual(t, first, digests(fakeBuild(t, created.Add(time.Second))), "the date is part of the image")
}

// Each tag is a multi-platform index whose images say what distroless/static's nonroot images
// say: the user, the entrypoint, the environment, and OCI labels naming the source.
func TestLayoutTagsAndConfig(t *testing.T) {
	b := fakeBuild(t, time.Unix(1764000000, 0))
	dir := filepath.Join(t.TempDir(), "layout")
	require.NoError(t, b.WriteLayout(dir))
	assert.ErrorContains(t, b.WriteLayout(dir), "is not empty", "an earlier build is never mixed in")
	idx, err := layout.ImageIndexFromPath(dir)
	require.NoError(t, err)
	top, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, top.Manifests, len(Images))
	for i, im := range Images {
		d := top.Manifests[i]
		assert.Equal(t, im.Tag, d.Annotations[RefName])
		tagged, err := idx.ImageIndex(d.Digest)
		require.NoError(t, err)
		m, err := tagged.IndexManifest()
		require.NoError(t, err)
		require.Len(t, m.Manifests, 2)
		for j, arch := range []string{"amd64", "arm64"} {
			assert.Equal(t, arch, m.Manifests[j].Platform.Architecture)
			img, err := tagged.Image(m.Manifests[j].Digest)
			require.NoError(t, err)
			cf, err := img.ConfigFile()
			require.NoError(t, err)
			assert.Equal(t, arch, cf.Architecture)
			assert.Equal(t, im.Entrypoint, cf.Config.Entrypoint)
			assert.Equal(t, "65532:65532", cf.Config.User)
			assert.Equal(t, Env, cf.Config.Env)
			assert.Equal(t, Source, cf.Config.Labels["org.opencontainers.image.source"])
			assert.Equal(t, "v1.2.3", cf.Config.Labels["org.opencontainers.image.version"])
			assert.Equal(t, b.Revision, cf.Config.Labels["org.opencontainers.image.revision"])
		}
	}
}

// The CA bundle is Mozilla's roots, every one parsing.
func TestCACertificates(t *testing.T) {
	b, err := CACertificates()
	require.NoError(t, err)
	n := 0
	for rest := b; ; n++ {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		_, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
	}
	assert.Greater(t, n, 100)
}

// node is one entry of a file tree, as a test compares two.
type node struct {
	Mode fs.FileMode
	UID  uint32
	Link string
	Sum  string
}

func tree(t *testing.T, root string) map[string]node {
	t.Helper()
	out := map[string]node{}
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, path)
		if rel == "." {
			return nil
		}
		st, err := os.Lstat(path)
		require.NoError(t, err)
		n := node{Mode: st.Mode() & (fs.ModePerm | fs.ModeSticky | fs.ModeSymlink | fs.ModeDir), UID: st.Sys().(*syscall.Stat_t).Uid}
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			n.Link, _ = os.Readlink(path)
			n.Mode = fs.ModeSymlink // a link's own mode bits mean nothing
		case st.Mode().IsRegular():
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			h := sha256.Sum256(b)
			n.Sum = hex.EncodeToString(h[:])
		}
		out["/"+rel] = n
		return nil
	}))
	return out
}

// What the Dockerfile copies (the tree hack/release --rootfs writes) is what the layers hold,
// unpacked by an independent tool: the same files, modes, owners and links.
func TestRootfsAgreesWithTheLayers(t *testing.T) {
	if os.Geteuid() != 0 {
		msg := "unpacking owners as they are needs root"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	skopeo := testcluster.NeedProgram(t, "skopeo", "skopeo")
	umoci := testcluster.NeedProgram(t, "umoci", "umoci")
	b := fakeBuild(t, time.Unix(1764000000, 0))
	dir := filepath.Join(t.TempDir(), "layout")
	require.NoError(t, b.WriteLayout(dir))
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	require.NoError(t, WriteRootfs(rootfs, b.Platforms[0]))
	want := tree(t, rootfs)

	single, bundle := filepath.Join(t.TempDir(), "single"), filepath.Join(t.TempDir(), "bundle")
	out, err := exec.Command(skopeo, "copy", "--quiet", "--override-arch", "amd64", "oci:"+dir+":wave", "oci:"+single+":wave").CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(umoci, "unpack", "--image", single+":wave", bundle).CombinedOutput()
	require.NoError(t, err, "%s", out)
	got := tree(t, filepath.Join(bundle, "rootfs"))
	assert.Equal(t, want, got)
	assert.Equal(t, fs.ModeDir|fs.ModeSticky|0o777, got["/tmp"].Mode, "/tmp is 1777")
	assert.Equal(t, uint32(UID), got["/home/nonroot"].UID)
	assert.Equal(t, "/reloader-fileonly", got["/bin/prometheus-config-reloader"].Link)
	assert.Equal(t, "/reloader-fileonly", got["/configmap-reload"].Link)
	passwd, err := os.ReadFile(filepath.Join(bundle, "rootfs", "etc", "passwd"))
	require.NoError(t, err)
	assert.Contains(t, string(passwd), "nonroot:x:65532:65532:")

	var spec struct {
		Process struct {
			Args []string
			User struct{ UID, GID int }
		}
	}
	b2, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b2, &spec))
	assert.Equal(t, []string{"/wave"}, spec.Process.Args)
	assert.Equal(t, UID, spec.Process.User.UID)
}

// stage is one stage of the Dockerfile, its instructions as written.
type stage struct {
	name, from string
	lines      []string
}

func dockerfile(t *testing.T) map[string]stage {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "..", "Dockerfile"))
	require.NoError(t, err)
	defer f.Close()
	stages := map[string]stage{}
	cur := ""
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if from, ok := strings.CutPrefix(line, "FROM "); ok {
			image, name, _ := strings.Cut(from, " AS ")
			stages[name], cur = stage{name: name, from: image}, name
			continue
		}
		require.NotEmpty(t, cur, "an instruction before FROM: %s", line)
		s := stages[cur]
		s.lines = append(s.lines, line)
		stages[cur] = s
	}
	return stages
}

// The Dockerfile, for docker build users, makes the same images: from nothing but the tree the
// build stage writes with the same code, with the same user, environment, entrypoint and
// labels as make image's.
func TestDockerfileAgreesWithTheImages(t *testing.T) {
	stages := dockerfile(t)
	build, ok := stages["build"]
	require.True(t, ok, "a build stage")
	assert.Contains(t, strings.Join(build.lines, "\n"), "go run ./hack/release --version=${VERSION} --rootfs=/rootfs")
	labels := Build{Version: "${VERSION}", Revision: "${REVISION}"}.Labels("")
	for _, im := range Images {
		s, ok := stages[im.Tag]
		require.True(t, ok, "a stage named %s", im.Tag)
		assert.Equal(t, "scratch", s.from, im.Tag)
		entry, err := json.Marshal(im.Entrypoint)
		require.NoError(t, err)
		want := []string{
			"COPY --from=build /rootfs/ /",
			"ENV " + strings.Join(Env, " "),
			"ARG VERSION=dev",
			"ARG REVISION",
			fmt.Sprintf(`LABEL org.opencontainers.image.source=%s org.opencontainers.image.licenses=%s org.opencontainers.image.title="configwave %s" org.opencontainers.image.version=%s org.opencontainers.image.revision=%s`,
				labels["org.opencontainers.image.source"], labels["org.opencontainers.image.licenses"], im.Tag, labels["org.opencontainers.image.version"], labels["org.opencontainers.image.revision"]),
			"USER " + User,
			"WORKDIR /",
			"ENTRYPOINT " + string(entry),
		}
		assert.Equal(t, want, s.lines, "the %s stage", im.Tag)
	}
	assert.Equal(t, "wave", lastStage(t), "docker build without --target makes wave's image, as it always did")
}

func lastStage(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "Dockerfile"))
	require.NoError(t, err)
	i := strings.LastIndex(string(b), " AS ")
	name, _, _ := strings.Cut(string(b[i+4:]), "\n")
	return strings.TrimSpace(name)
}
