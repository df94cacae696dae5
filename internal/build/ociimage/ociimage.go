// Package ociimage builds configwave's container images in Go, from the static binaries alone:
// no container engine and no base image. What distroless/static gives (users, groups, CA
// certificates, /tmp) is written here, and the same tree is what the Dockerfile copies, so the
// two cannot drift apart.
//
//	b := ociimage.Build{Platforms: bins, Version: "v1.2.3", Revision: sha, Created: t}
//	err := b.WriteLayout("dist/image")
//
// One build gives two images, tagged in the layout after what each runs: "reloader" (its
// entrypoint /reloader: the sidecar, and the peers' reloaders whose charts give arguments only)
// and "wave" (entrypoint /wave). Both hold both binaries and the same layers; the program names
// the peers' pod specs run by path (/bin/prometheus-config-reloader, /configmap-reload) lead to
// the reloader's file-only build (/reloader-fileonly: no API client, so no more memory than
// the peers it replaces), which reads its command line as that peer's.
package ociimage

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The user every image runs as: distroless' nonroot.
const (
	UID  = 65532
	User = "65532:65532"
)

// Image is one image of a build: its tag in the layout, and what it runs.
type Image struct {
	Tag        string
	Entrypoint []string
}

// Images are the images one build makes.
var Images = []Image{
	{Tag: "reloader", Entrypoint: []string{"/reloader"}},
	{Tag: "wave", Entrypoint: []string{"/wave"}},
}

// Binaries are the programs in every image, at the root: the reloader, its file-only build,
// wave, and the kubectl plugin (copied out of the image by those who take their tools from it).
var Binaries = []string{"reloader", "reloader-fileonly", "wave", "kubectl-configwave"}

// Links are the other program names in every image: the paths the peers' own pod specs run,
// each leading to one of Binaries.
var Links = map[string]string{
	"/bin/prometheus-config-reloader": "/reloader-fileonly", // the Prometheus Operator's command
	"/configmap-reload":               "/reloader-fileonly", // configmap-reload's entrypoint
	"/manager":                        "/wave",              // Stakater Reloader's entrypoint
	"/bin/wave":                       "/wave",              // Wave's entrypoint
}

// Env is every image's environment.
var Env = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
}

// Source is where the images' source lives, in their labels.
const Source = "https://github.com/configwave/configwave"

// Platform is one platform's binaries: name → path of the file.
type Platform struct {
	OS, Arch string
	Binaries map[string]string
}

// Build is what an image build takes.
type Build struct {
	Platforms []Platform
	Version   string    // the release, in the labels
	Revision  string    // the commit, in the labels; "" outside a checkout
	Created   time.Time // every timestamp in the images: the commit's time, so that a commit gives one digest
}

// Labels are the OCI annotations of an image's config.
func (b Build) Labels(tag string) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.source":      Source,
		"org.opencontainers.image.version":     b.Version,
		"org.opencontainers.image.title":       "configwave " + tag,
		"org.opencontainers.image.description": "configwave: the " + tag + " (both binaries inside)",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     b.Created.UTC().Format(time.RFC3339),
	}
	if b.Revision != "" {
		l["org.opencontainers.image.revision"] = b.Revision
	}
	return l
}

// Indexes builds one multi-platform index per image, keyed by its tag.
func (b Build) Indexes() (map[string]v1.ImageIndex, error) {
	if len(b.Platforms) == 0 {
		return nil, fmt.Errorf("no platform to build the images for")
	}
	base, err := b.baseLayer()
	if err != nil {
		return nil, err
	}
	out := map[string]v1.ImageIndex{}
	for _, im := range Images {
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		for _, p := range b.Platforms {
			bins, err := b.binaryLayer(p)
			if err != nil {
				return nil, err
			}
			img, err := b.image(im, p, base, bins)
			if err != nil {
				return nil, err
			}
			idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
				Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch},
			}})
		}
		out[im.Tag] = idx
	}
	return out, nil
}

func (b Build) image(im Image, p Platform, layers ...v1.Layer) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	for _, l := range layers {
		var err error
		if img, err = mutate.Append(img, mutate.Addendum{Layer: l, MediaType: types.OCILayer,
			History: v1.History{Created: v1.Time{Time: b.Created}, CreatedBy: "configwave hack/image"}}); err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Arch
	cf.Created = v1.Time{Time: b.Created}
	cf.Config = v1.Config{
		Entrypoint: im.Entrypoint,
		User:       User,
		Env:        Env,
		WorkingDir: "/",
		Labels:     b.Labels(im.Tag),
	}
	return mutate.ConfigFile(img, cf)
}

// An entry of a layer's tar.
type entry struct {
	name     string // absolute, cleaned
	mode     int64  // permission bits (and sticky)
	uid      int
	typeflag byte
	link     string // a symlink's target
	content  []byte // a file's content, or
	from     string // the file to read it from
}

func dir(name string, mode int64, uid int) entry {
	return entry{name: name, mode: mode, uid: uid, typeflag: tar.TypeDir}
}

func file(name string, mode int64, content []byte) entry {
	return entry{name: name, mode: mode, typeflag: tar.TypeReg, content: content}
}

// baseFiles are what distroless/static gives, the same for every platform: users and groups
// with nonroot (65532), CA certificates, /tmp (1777), and the folders of the program links.
func baseFiles() ([]entry, error) {
	certs, err := CACertificates()
	if err != nil {
		return nil, err
	}
	return []entry{
		dir("/bin", 0o755, 0),
		dir("/etc", 0o755, 0),
		file("/etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n")),
		file("/etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n")),
		file("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")),
		dir("/etc/ssl", 0o755, 0),
		dir("/etc/ssl/certs", 0o755, 0),
		file("/etc/ssl/certs/ca-certificates.crt", 0o644, certs),
		dir("/home", 0o755, 0),
		dir("/home/nonroot", 0o700, UID),
		dir("/root", 0o700, 0),
		dir("/tmp", 0o1777, 0),
	}, nil
}

// CACertificates are the Mozilla roots Go's x509roots/fallback module carries, as PEM: pinned by
// go.mod, so the same commit always gives the same file. Roots that NSS trusts only with a
// constraint (distrusted after a date) are left out, since a PEM bundle cannot carry one.
func CACertificates() ([]byte, error) {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if _, err := x509.ParseCertificate(r.Certificate); err != nil {
			return nil, fmt.Errorf("a CA certificate of the bundle does not parse: %w", err)
		}
		if err := pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// programFiles are one platform's binaries and the links to them.
func programFiles(p Platform) ([]entry, error) {
	var out []entry
	for _, name := range Binaries {
		from, ok := p.Binaries[name]
		if !ok {
			return nil, fmt.Errorf("no %s binary for %s/%s", name, p.OS, p.Arch)
		}
		out = append(out, entry{name: "/" + name, mode: 0o755, typeflag: tar.TypeReg, from: from})
	}
	for link, target := range Links {
		out = append(out, entry{name: link, mode: 0o777, typeflag: tar.TypeSymlink, link: target})
	}
	return out, nil
}

func (b Build) baseLayer() (v1.Layer, error) {
	files, err := baseFiles()
	if err != nil {
		return nil, err
	}
	return b.layer(files)
}

func (b Build) binaryLayer(p Platform) (v1.Layer, error) {
	files, err := programFiles(p)
	if err != nil {
		return nil, err
	}
	return b.layer(files)
}

// layer packs entries into a reproducible tar: sorted, every time b.Created, owners by number.
func (b Build) layer(entries []entry) (v1.Layer, error) {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(x, y entry) int { return strings.Compare(x.name, y.name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := b.Created.UTC().Truncate(time.Second)
	for _, e := range entries {
		h := &tar.Header{Name: strings.TrimPrefix(e.name, "/"), Mode: e.mode, Uid: e.uid, Gid: e.uid, Typeflag: e.typeflag,
			Linkname: e.link, ModTime: mtime, Format: tar.FormatPAX}
		content := e.content
		if e.from != "" {
			var err error
			if content, err = os.ReadFile(e.from); err != nil {
				return nil, fmt.Errorf("read %s for the image: %w", path.Base(e.name), err)
			}
		}
		if e.typeflag == tar.TypeDir {
			h.Name += "/"
		}
		if e.typeflag == tar.TypeReg {
			h.Size = int64(len(content))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer))
}

func unix(sec int64) time.Time { return time.Unix(sec, 0).UTC() }
