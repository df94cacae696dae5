// Package testvolume writes a folder exactly as kubelet's atomic writer updates a ConfigMap,
// Secret or projected volume (pkg/volume/util/atomic_writer.go), one step at a time, so that a
// test can also stop between two steps and look at what a reader sees there.
//
//	v := testvolume.New(t.TempDir())
//	v.Write(map[string]string{"prometheus.yml": "..."})   // all steps
//	steps := v.Steps(map[string]string{"prometheus.yml": "..."})
//	testvolume.Run(steps[:testvolume.LinkNewNames]) // kubelet renamed ..data, linked nothing yet
//	// ... a reader runs here ... then the rest:
//	testvolume.Run(steps[testvolume.LinkNewNames:])
//
// No kubelet runs in these tests; this is the only way a mounted volume changes in them.
package testvolume

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

const (
	dataLink    = "..data"
	newDataLink = "..data_tmp"
)

// Volume is one mounted volume's folder.
type Volume struct {
	Dir string
}

// New returns the volume at dir, which must exist.
func New(dir string) *Volume { return &Volume{Dir: dir} }

// Step is one of the writer's steps.
type Step struct {
	Name string
	Do   func() error
}

// Write runs every step of one update to files (path relative to the volume → content).
func (v *Volume) Write(files map[string]string) error { return Run(v.Steps(files)) }

// The index in Steps of each step, and kubelet's number for it in the comment on
// AtomicWriter.Write. Between SwapData and RemoveOldNames a reader of the folder's names sees
// what the app sees then: the new content under the old names, a new key not linked yet, a
// removed key's link dangling.
const (
	WriteNewFolder  = iota // kubelet's 5–7
	LinkTmp                // 8
	SwapData               // 9: ..data_tmp renamed over ..data
	LinkNewNames           // 10
	RemoveOldNames         // 11
	RemoveOldFolder        // 12
)

// Run runs steps in order, and stops at the first that fails.
func Run(steps []Step) error {
	for _, s := range steps {
		if err := s.Do(); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
	}
	return nil
}

// Steps are the steps of one update, in kubelet's order:
//  1. a new timestamped folder ..YYYY_MM_DD_HH_MM_SS.N holds the whole new set;
//  2. a link ..data_tmp names it;
//  3. ..data_tmp is renamed over ..data: the one atomic moment;
//  4. a user-visible link NAME -> ..data/NAME is made for each new top-level name;
//  5. user-visible names the new set no longer has are removed;
//  6. the old timestamped folder is removed.
func (v *Volume) Steps(files map[string]string) []Step {
	var newDir, oldDir string
	return []Step{
		{"write the new timestamped folder", func() error {
			oldDir, _ = os.Readlink(filepath.Join(v.Dir, dataLink))
			d, err := os.MkdirTemp(v.Dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
			if err != nil {
				return err
			}
			newDir = filepath.Base(d)
			// As kubelet: other users (the container's) must be able to walk into it, whatever
			// the umask or MkdirTemp's 0700.
			if err := os.Chmod(d, 0o755); err != nil {
				return err
			}
			for _, p := range sortedKeys(files) {
				full := filepath.Join(d, filepath.FromSlash(p))
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(full, []byte(files[p]), 0o644); err != nil {
					return err
				}
			}
			return nil
		}},
		{"link ..data_tmp to it", func() error {
			tmp := filepath.Join(v.Dir, newDataLink)
			_ = os.Remove(tmp)
			return os.Symlink(newDir, tmp)
		}},
		{"rename ..data_tmp over ..data", func() error {
			return os.Rename(filepath.Join(v.Dir, newDataLink), filepath.Join(v.Dir, dataLink))
		}},
		{"link the new user-visible names", func() error {
			for _, top := range topLevel(files) {
				p := filepath.Join(v.Dir, top)
				if _, err := os.Lstat(p); err == nil {
					continue
				}
				if err := os.Symlink(filepath.Join(dataLink, top), p); err != nil {
					return err
				}
			}
			return nil
		}},
		{"remove user-visible names no longer in the set", func() error {
			keep := map[string]bool{}
			for _, top := range topLevel(files) {
				keep[top] = true
			}
			entries, err := os.ReadDir(v.Dir)
			if err != nil {
				return err
			}
			for _, e := range entries {
				if !strings.HasPrefix(e.Name(), "..") && !keep[e.Name()] {
					if err := os.Remove(filepath.Join(v.Dir, e.Name())); err != nil {
						return err
					}
				}
			}
			return nil
		}},
		{"remove the old timestamped folder", func() error {
			if oldDir == "" {
				return nil
			}
			return os.RemoveAll(filepath.Join(v.Dir, oldDir))
		}},
	}
}

func topLevel(files map[string]string) []string {
	seen := map[string]bool{}
	var tops []string
	for p := range files {
		top, _, _ := strings.Cut(p, "/")
		if !seen[top] {
			seen[top] = true
			tops = append(tops, top)
		}
	}
	sort.Strings(tops)
	return tops
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
