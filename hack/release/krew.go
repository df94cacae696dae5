package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/configwave/configwave/internal/build/ociimage"
)

// pluginBinary is the kubectl plugin's program; krew installs it from an archive per platform.
const pluginBinary = "kubectl-configwave"

// krewPlugin is krew's plugin manifest (krew.googlecontainertools.github.com/v1alpha2), the
// file a krew index takes.
type krewPlugin struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       krewSpec       `json:"spec"`
}

type krewSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description"`
	Platforms        []krewPlatform `json:"platforms"`
}

type krewPlatform struct {
	Selector map[string]map[string]string `json:"selector"`
	URI      string                       `json:"uri"`
	Sha256   string                       `json:"sha256"`
	Bin      string                       `json:"bin"`
}

// writeKrew writes, for each platform, an archive of the plugin and the licence, and the krew
// manifest that names them by the release's download address and their SHA-256; it returns
// the files, archives first.
func writeKrew(o options, out string, platforms []ociimage.Platform, modTime time.Time) ([]string, error) {
	m := krewPlugin{APIVersion: "krew.googlecontainertools.github.com/v1alpha2", Kind: "Plugin",
		Metadata: map[string]any{"name": "configwave"},
		Spec: krewSpec{Version: o.version, Homepage: ociimage.Source,
			ShortDescription: "See a workload's config history and act on it",
			Description: "Shows which config (ConfigMaps and Secrets) each revision of a Deployment, StatefulSet, DaemonSet,\n" +
				"CronJob or Argo Rollout ran with, what changed between two (a Secret's keys and sizes only), which\n" +
				"pod runs which, undoes to a revision chosen by its config, and approves or rejects a change that\n" +
				"waits. Needs configwave's wave with config revisions on the workload.\n"}}
	var files []string
	for _, p := range platforms {
		name := fmt.Sprintf("%s-%s-%s-%s.tar.gz", pluginBinary, fileVersion(o.version), p.OS, p.Arch)
		if err := writeArchive(filepath.Join(out, name), modTime, map[string]string{
			pluginBinary: p.Binaries[pluginBinary], "LICENSE": filepath.Join(o.root, "LICENSE")}); err != nil {
			return nil, err
		}
		sum, err := sha256File(filepath.Join(out, name))
		if err != nil {
			return nil, err
		}
		m.Spec.Platforms = append(m.Spec.Platforms, krewPlatform{
			Selector: map[string]map[string]string{"matchLabels": {"os": p.OS, "arch": p.Arch}},
			URI:      ociimage.Source + "/releases/download/" + o.version + "/" + name, Sha256: sum, Bin: pluginBinary})
		files = append(files, name)
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	manifest := "configwave.krew.yaml"
	if err := os.WriteFile(filepath.Join(out, manifest), b, 0o644); err != nil {
		return nil, fmt.Errorf("write the krew manifest: %w", err)
	}
	return append(files, manifest), nil
}

// writeArchive writes a gzipped tar of files (name in the archive → path), in the order of
// their names, each dated modTime, so that one commit gives one archive.
func writeArchive(path string, modTime time.Time, files map[string]string) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, name := range []string{"LICENSE", pluginBinary} {
		src, ok := files[name]
		if !ok {
			continue
		}
		if err := addFile(tw, name, src, modTime); err != nil {
			return fmt.Errorf("archive %s: %w", filepath.Base(path), err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func addFile(tw *tar.Writer, name, src string, modTime time.Time) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	mode := int64(0o644)
	if st.Mode()&0o111 != 0 {
		mode = 0o755
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: st.Size(), ModTime: modTime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err = io.Copy(tw, in)
	return err
}
