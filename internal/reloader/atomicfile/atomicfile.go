// Package atomicfile replaces a file so that a reader, or the next start after a crash, sees the
// old content or the new one, never a part and never an empty file: kubelet's atomic writer's
// steps for one file.
//
//	changed, err := atomicfile.Write("/etc/prometheus/config_out/prometheus.env.yaml", data, 0o644)
package atomicfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Write replaces path with data:
//  1. a temporary file in the same folder (so the rename stays on one file system), named
//     .NAME.tmp-RANDOM, holds the whole content;
//  2. it is synced to disk and closed, and given mode;
//  3. it is renamed over path: the one atomic moment;
//  4. the folder is synced, so that the rename itself survives a crash of the node.
//
// Nothing is written when path already holds data. A temporary file left by a crash between 1
// and 3 is removed by Clean.
func Write(path string, data []byte, mode os.FileMode) (changed bool, err error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, tempPrefix(path)+"*")
	if err != nil {
		return false, fmt.Errorf("write %s: %w (is its folder a writable emptyDir?)", path, err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), mode)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	return true, nil
}

func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Clean removes the temporary files a crash left beside path.
func Clean(path string) error {
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix(path)) && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(filepath.Dir(path), e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
