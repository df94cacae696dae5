package ociimage

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// RefName is the annotation that tags an image in an OCI layout's index.
const RefName = "org.opencontainers.image.ref.name"

// WriteLayout writes every image of the build into an OCI image layout at dir, which must not
// exist or be empty; each image's multi-platform index is tagged with the image's tag.
func (b Build) WriteLayout(dir string) error {
	if err := emptyFolder(dir); err != nil {
		return err
	}
	indexes, err := b.Indexes()
	if err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write the image layout %s: %w", dir, err)
	}
	for _, im := range Images {
		if err := p.AppendIndex(indexes[im.Tag], layout.WithAnnotations(map[string]string{RefName: im.Tag})); err != nil {
			return fmt.Errorf("write image %s into %s: %w", im.Tag, dir, err)
		}
	}
	return nil
}

func emptyFolder(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("read %s: %w", dir, err)
	case len(entries) > 0:
		return fmt.Errorf("%s is not empty: remove it, or give another folder, so that no image of an earlier build is kept beside this one", dir)
	}
	return nil
}

// WriteRootfs writes what an image of the build holds for platform p into dir, the tree the
// Dockerfile copies into its images: the same files, modes, owners (when run as root) and links
// as the layers.
func WriteRootfs(dir string, p Platform) error {
	base, err := baseFiles()
	if err != nil {
		return err
	}
	progs, err := programFiles(p)
	if err != nil {
		return err
	}
	entries := slices.Concat(base, progs)
	slices.SortFunc(entries, func(x, y entry) int {
		switch {
		case x.name < y.name:
			return -1
		case x.name > y.name:
			return 1
		}
		return 0
	})
	for _, e := range entries {
		path := filepath.Join(dir, e.name)
		switch e.typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(e.link, path); err != nil {
				return err
			}
			continue
		case tar.TypeReg:
			content := e.content
			if e.from != "" {
				if content, err = os.ReadFile(e.from); err != nil {
					return err
				}
			}
			if err := os.WriteFile(path, content, 0o600); err != nil {
				return err
			}
		}
		// Chmod after the write: the umask would take the sticky bit of /tmp and group bits.
		if err := os.Chmod(path, fs.FileMode(e.mode&0o777)|modeBits(e.mode)); err != nil {
			return err
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(path, e.uid, e.uid); err != nil {
				return err
			}
		}
	}
	return nil
}

func modeBits(m int64) fs.FileMode {
	var out fs.FileMode
	if m&0o1000 != 0 {
		out |= fs.ModeSticky
	}
	return out
}

// WriteArchive writes the OCI layout at dir as one tar (skopeo's oci-archive: transport), its
// entries sorted and dated mtime, so that the same layout gives the same archive.
func WriteArchive(dir string, w io.Writer, mtime int64) error {
	tw := tar.NewWriter(w)
	var names []string
	if err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir {
			names = append(names, path)
		}
		return nil
	}); err != nil {
		return err
	}
	slices.Sort(names)
	for _, path := range names {
		st, err := os.Lstat(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Typeflag: tar.TypeReg, Size: st.Size(), Format: tar.FormatPAX}
		h.ModTime = unix(mtime)
		if st.IsDir() {
			h.Name, h.Mode, h.Typeflag, h.Size = h.Name+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if st.IsDir() {
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return tw.Close()
}
