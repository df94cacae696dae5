// Package unpack materialises a set of files under a root folder atomically, the way kubelet's
// atomic writer updates a ConfigMap volume: a reader sees the old complete set or the new one.
//
//	w := unpack.New("/config")
//	changed, err := w.Write(map[string]unpack.File{"app.yaml": {Data: b, Mode: 0o644}})
package unpack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	dataLink    = "..data"     // symlink to the current timestamped folder
	newDataLink = "..data_tmp" // prepared beside ..data, then renamed over it
)

// File is one file's content and permission bits.
type File struct {
	Data []byte
	Mode fs.FileMode
}

// Writer owns the files it wrote under one root. Write is not safe for concurrent use; the
// reloader calls it from one goroutine.
type Writer struct {
	root   string
	tidied bool // folders left by an earlier process were removed

	mu      sync.Mutex   // retired is also used by the timers that remove retired folders
	retired []retiredDir // swapped-out folders, removed once no reader can still be inside

	// The set this Writer last made live: its folder, its digest and its top-level names. While
	// ..data still names that folder, a set with another digest is known to differ without
	// reading the folder back, and its names are known without listing it: a change then
	// costs about half the file-system calls, all of them before the app is told.
	lastDir    string
	lastDigest uint64
	lastTop    map[string]bool
	seed       maphash.Seed
}

type retiredDir struct {
	name string
	at   time.Time
}

// retireGrace is how long a swapped-out folder stays on disk. A reader that resolved ..data
// just before the swap is still walking into the old folder; removing it at once would make
// that open fail with "no such file" (seen in the concurrent-reader test).
const retireGrace = 2 * time.Second

// New returns a Writer for root, which must exist.
func New(root string) *Writer { return &Writer{root: root, seed: maphash.MakeSeed()} }

// Write makes the files under the root exactly files (relative slash paths), and reports
// whether anything changed. Nothing is written when the content is already in place.
//
// The algorithm, and why a reader never sees a mix:
//  1. Validate every path first: a bad one fails the whole write before anything is touched.
//  2. Compare with the folder ..data points at; equal content (and modes) means no write. When
//     that folder is the one this Writer last made live and the new set's digest differs from
//     that set's, they differ: nothing is read back.
//  3. Check every top-level name: if it exists and is not our symlink into ..data, stop,
//     because it belongs to someone else.
//  4. Write the new set into a fresh private folder ..<timestamp>.<random>; open it to readers
//     (0755) only when it is complete. Nothing is fsynced: readers see a complete set through
//     the rename alone, and a power loss that could tear a file also ends the pod whose volume
//     this is (an emptyDir does not outlive its pod); even on a volume that does, the next
//     start compares every file with the API's content and rewrites what differs. fsync was
//     most of what the reloader added to a change's latency.
//  5. Point ..data_tmp at it and rename it over ..data. rename(2) is atomic, so every path
//     resolved through ..data now resolves in the new folder, never half in each.
//  6. Create the user-visible symlinks name -> ..data/name for new top-level names (and for
//     any the app deleted) and remove those of names that are gone; existing ones already
//     resolve through ..data.
//  7. Retire the old folder; it is removed once retireGrace has passed, so a previous set
//     stays on disk for 2 s at most. Folders of our pattern that an earlier process left
//     (retired, or half-made when it was killed) are removed by the first Write.
//
// A failure before step 5 leaves the old set in place and removes the half-made folder.
func (w *Writer) Write(files map[string]File) (changed bool, err error) {
	return w.WriteChecked(files, nil)
}

// WriteChecked is Write with a check that runs between steps 4 and 5: check gets the new
// folder, complete, with the same relative layout as the root, while readers still
// see the old set. An error from check leaves the old set in place and is returned as is.
//
// Every step resolves names through an os.Root on the config root, never through a path: the
// root may be a volume shared with containers we do not trust, which can rename folders or
// plant links between two of our steps. A link that would lead out of the root fails the step
// instead of carrying a read, a write, a chmod or a removal outside it.
func (w *Writer) WriteChecked(files map[string]File, check func(dir string) error) (changed bool, err error) {
	top := map[string]bool{}
	dirs := map[string]bool{} // every folder some path needs
	for p := range files {
		if err := ValidatePath(p); err != nil {
			return false, err
		}
		top[strings.SplitN(p, "/", 2)[0]] = true
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for p := range files {
		if dirs[p] {
			return false, fmt.Errorf("path %q is both a file and the folder of other paths", p)
		}
	}
	base, err := os.OpenRoot(w.root)
	if err != nil {
		return false, withHint(fmt.Errorf("open the config root %s: %w", w.root, err), w.root, 0)
	}
	defer base.Close()
	if !w.tidied {
		w.tidied = removeLeftovers(base, w.root) == nil
	}
	w.removeRetired(time.Now())

	oldDir, err := base.Readlink(dataLink)
	switch {
	case errors.Is(err, syscall.EINVAL):
		return false, fmt.Errorf("%s under %s is not the symlink configwave makes; something else wrote it: remove it, or choose another --configroot", dataLink, w.root)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, withHint(fmt.Errorf("read %s under %s: %w", dataLink, w.root, err), w.root, 0)
	}
	if !isOwnDir(oldDir) {
		// Not a link we made: someone with write access to a shared root could point ..data
		// at "../../etc" so that retiring "the old folder" would delete outside the root. The
		// link is replaced by the swap below; nothing it points at is read, kept or removed.
		oldDir = ""
	}
	digest := w.setDigest(files)
	// Another set than the live one, which this Writer made, differs without a read.
	knownToDiffer := oldDir != "" && oldDir == w.lastDir && digest != w.lastDigest
	if oldDir != "" && !knownToDiffer {
		old, err := base.OpenRoot(oldDir)
		if err != nil {
			oldDir = "" // gone, or swapped for a link out of the root: never read, kept or removed
		} else {
			same := sameContent(old, files)
			old.Close()
			if same {
				w.lastDir, w.lastDigest, w.lastTop = oldDir, digest, top
				// Nothing to write, but a name the app deleted comes back, as kubelet's writer does.
				return false, w.linkMissing(base, top, nil)
			}
		}
	}
	linked := make(map[string]bool, len(top)) // names whose link is in place: none to make after the swap
	for name := range top {
		ours, err := w.checkOwned(base, name)
		if err != nil {
			return false, err
		}
		linked[name] = ours
	}

	// The new folder is 0700 until it is complete: nobody else can enter it to swap a
	// subfolder for a symlink, and writeSet refuses links that leave it anyway.
	newName, err := mkdirNew(base)
	if err != nil {
		return false, withHint(fmt.Errorf("create a new folder under %s: %w", w.root, err), w.root, setSize(files))
	}
	swapped := false
	defer func() {
		if err != nil && !swapped { // after the swap the new folder is the live set
			_ = base.RemoveAll(newName)
		}
	}()
	if err := writeSet(base, newName, files); err != nil {
		return false, withHint(fmt.Errorf("write the new config under %s: %w", w.root, err), w.root, setSize(files))
	}
	if check != nil {
		if err := check(filepath.Join(w.root, newName)); err != nil {
			return false, err
		}
	}
	if err := base.Chmod(newName, 0o755); err != nil {
		return false, fmt.Errorf("open the new folder %s under %s to readers: %w", newName, w.root, err)
	}

	err = base.Symlink(newName, newDataLink)
	if errors.Is(err, fs.ErrExist) { // left by a write that was cut short
		_ = base.Remove(newDataLink)
		err = base.Symlink(newName, newDataLink)
	}
	if err != nil {
		return false, withHint(fmt.Errorf("create %s under %s: %w", newDataLink, w.root, err), w.root, 0)
	}
	if err := base.Rename(newDataLink, dataLink); err != nil {
		_ = base.Remove(newDataLink)
		return false, withHint(fmt.Errorf("swap %s under %s: %w", dataLink, w.root, err), w.root, 0)
	}
	swapped = true
	oldTop := w.lastTop
	if oldDir == "" || oldDir != w.lastDir {
		oldTop = nil // not a set this Writer made: its names are read from its folder
	}
	w.lastDir, w.lastDigest, w.lastTop = newName, digest, top

	// The new set is live; the old folder is retired whatever fails below.
	return true, w.afterSwap(base, oldDir, oldTop, top, linked)
}

// setDigest hashes a set's paths, modes and bytes. Two sets with different digests differ;
// two with the same one are compared byte for byte. So a fast hash does, where a collision
// costs only that comparison: maphash reads 1 MiB in a fraction of the time sha256 takes.
func (w *Writer) setDigest(files map[string]File) uint64 {
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	var h maphash.Hash
	h.SetSeed(w.seed)
	var n [8]byte
	for _, p := range names {
		f := files[p]
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.WriteString(p)
		binary.LittleEndian.PutUint64(n[:], uint64(f.Mode.Perm())<<32|uint64(len(f.Data)))
		h.Write(n[:])
		h.Write(f.Data)
	}
	return h.Sum64()
}

// mkdirNew creates the folder of a new set, ..<UTC time>.<random digits>, 0700, in base.
func mkdirNew(base *os.Root) (string, error) {
	stamp := ".." + time.Now().UTC().Format("2006_01_02_15_04_05.")
	for range 1000 {
		name := stamp + strconv.FormatUint(uint64(rand.Uint32()), 10)
		err := base.Mkdir(name, 0o700)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", errors.New("no free folder name after 1000 tries")
}

// isOwnDir reports whether a ..data target has the form Write creates: one name in the root,
// starting with "..", never "." or "..".
func isOwnDir(name string) bool {
	return strings.HasPrefix(name, "..") && name != ".." && !strings.ContainsAny(name, `/\`) && name != dataLink && name != newDataLink
}

func (w *Writer) afterSwap(base *os.Root, oldDir string, oldTop, top, linked map[string]bool) error {
	if oldDir != "" {
		w.retire(oldDir)
	}
	return w.updateVisibleLinks(base, oldDir, oldTop, top, linked)
}

// retire schedules the removal of a swapped-out folder once retireGrace has passed, so that an
// old set (old Secret values with it) does not stay in a volume that lives for months until
// the next change comes.
func (w *Writer) retire(name string) {
	w.mu.Lock()
	w.retired = append(w.retired, retiredDir{name: name, at: time.Now()})
	w.mu.Unlock()
	time.AfterFunc(retireGrace, func() { w.removeRetired(time.Now()) })
}

func (w *Writer) removeRetired(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.ContainsFunc(w.retired, func(r retiredDir) bool { return now.Sub(r.at) >= retireGrace }) {
		return // none is due: the root is not even opened
	}
	root, err := os.OpenRoot(w.root)
	if err != nil {
		return
	}
	defer root.Close()
	kept := w.retired[:0]
	for _, r := range w.retired {
		if now.Sub(r.at) < retireGrace || root.RemoveAll(r.name) != nil {
			kept = append(kept, r)
		}
	}
	w.retired = kept
}

// ownFolder matches the folders Write creates: ..<UTC time>.<MkdirTemp's random digits>.
var ownFolder = regexp.MustCompile(`^\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\d+$`)

// removeLeftovers removes the folders of our naming pattern that ..data does not point at:
// sets an earlier reloader retired, or half-made when it was killed. Kubelet's writer removes
// the old folder in the same write; a restarted reloader has lost its list of retired folders,
// and without this they would stay in the volume, old Secret values with them, for its life.
// Only real folders are removed, through an os.Root, so a planted link leads nowhere.
func removeLeftovers(root *os.Root, rootPath string) error {
	live, _ := root.Readlink(dataLink)
	entries, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == live || !ownFolder.MatchString(e.Name()) {
			continue
		}
		if err := root.RemoveAll(e.Name()); err != nil {
			return fmt.Errorf("remove the old folder %s under %s: %w", e.Name(), rootPath, err)
		}
	}
	return nil
}

// HasLiveSet reports whether the root holds a set this writer's kind made: a ..data link of
// our form to a folder inside the root. A restarted reloader finds its predecessor's set so.
func (w *Writer) HasLiveSet() bool {
	base, err := os.OpenRoot(w.root)
	if err != nil {
		return false
	}
	defer base.Close()
	dir, err := base.Readlink(dataLink)
	if err != nil || !isOwnDir(dir) {
		return false
	}
	old, err := base.OpenRoot(dir)
	if err != nil {
		return false
	}
	old.Close()
	return true
}

// ValidatePath accepts a relative slash path that stays inside the root: not empty, not
// absolute, no "." or ".." element, no element starting with "..", which is reserved for the
// writer's own bookkeeping.
func ValidatePath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case len(p) > 4096:
		return fmt.Errorf("path %.40q... is longer than 4096 bytes", p)
	case path.IsAbs(p) || strings.HasPrefix(p, `\`):
		return fmt.Errorf("path %q is absolute; only paths relative to the config root are allowed", p)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("path %q contains a NUL byte", p)
	}
	for _, elem := range strings.Split(p, "/") {
		switch {
		case elem == "":
			return fmt.Errorf("path %q has an empty element", p)
		case elem == "." || elem == "..":
			return fmt.Errorf("path %q contains %q; it must stay inside the config root", p, elem)
		case strings.HasPrefix(elem, ".."):
			return fmt.Errorf("path %q has an element starting with '..', which is reserved", p)
		case len(elem) > 255:
			return fmt.Errorf("path %q has an element longer than 255 bytes", p)
		}
	}
	return nil
}

// checkOwned reports whether name under the root is the symlink this writer makes (linked),
// and returns an error when it is anything else, so that a file the user or the app put there
// is never replaced. It runs on every change, between the change and the app's reload, so one
// readlink tells the usual cases apart: our link, nothing, or something that is not a link
// (EINVAL), which only the error message needs told apart further.
func (w *Writer) checkOwned(base *os.Root, name string) (linked bool, err error) {
	target, err := base.Readlink(name)
	what := "a symlink"
	switch {
	case err == nil && target == path.Join(dataLink, name):
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case errors.Is(err, syscall.EINVAL):
		what = "a file"
		if info, err := base.Lstat(name); err == nil && info.IsDir() {
			what = "a folder"
		}
	case err != nil:
		return false, withHint(fmt.Errorf("check %s under %s: %w", name, w.root, err), w.root, 0)
	}
	return false, fmt.Errorf("%s under %s is %s that configwave did not write; move it away or choose another --configroot", name, w.root, what)
}

// linkMissing creates the user-visible symlink name -> ..data/name for every top-level name
// that does not exist. An existing name is either our link (checked before a swap) or someone
// else's, which is never replaced. Names in linked were seen to be our link just before the
// swap and are not looked at again.
func (w *Writer) linkMissing(base *os.Root, top, linked map[string]bool) error {
	for name := range top {
		if linked[name] {
			continue
		}
		if _, err := base.Lstat(name); err == nil {
			continue
		}
		if err := base.Symlink(path.Join(dataLink, name), name); err != nil && !errors.Is(err, fs.ErrExist) {
			return withHint(fmt.Errorf("link %s under %s: %w", name, w.root, err), w.root, 0)
		}
	}
	return nil
}

// updateVisibleLinks makes the top-level links match the new set: links for its new names, and
// none for the old set's names that are gone. The old set's names are oldTop when this Writer
// made it, else read from its folder.
func (w *Writer) updateVisibleLinks(base *os.Root, oldDir string, oldTop, top, linked map[string]bool) error {
	if err := w.linkMissing(base, top, linked); err != nil {
		return err
	}
	if oldDir == "" {
		return nil
	}
	if oldTop == nil {
		old, err := base.OpenRoot(oldDir)
		if err != nil {
			return fmt.Errorf("open old folder %s: %w", oldDir, err)
		}
		defer old.Close()
		entries, err := fs.ReadDir(old.FS(), ".")
		if err != nil {
			return fmt.Errorf("list old folder %s: %w", oldDir, err)
		}
		oldTop = map[string]bool{}
		for _, e := range entries {
			oldTop[e.Name()] = true
		}
	}
	for name := range oldTop {
		if top[name] {
			continue
		}
		if _, err := w.checkOwned(base, name); err != nil {
			continue
		}
		if err := base.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove link %s under %s: %w", name, w.root, err)
		}
	}
	return nil
}

// sameContent reports whether root holds exactly files, byte for byte and mode for mode. Only
// regular files count: a symlink or anything else planted in the live folder makes it differ,
// and the next write replaces it without following it.
func sameContent(root *os.Root, files map[string]File) bool {
	seen := 0
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		want, ok := files[p]
		if !ok || !d.Type().IsRegular() {
			return errors.New("differs")
		}
		info, err := d.Info()
		if err != nil || info.Mode().Perm() != want.Mode.Perm() || info.Size() != int64(len(want.Data)) {
			return errors.New("differs")
		}
		got, err := root.ReadFile(p)
		if err != nil || !bytes.Equal(got, want.Data) {
			return errors.New("differs")
		}
		seen++
		return nil
	})
	return err == nil && seen == len(files)
}

// writeSet writes files into the folder name of base (no fsync: see the package comment). Every path is resolved
// through an os.Root, so a subfolder swapped for a symlink while the set is written cannot
// carry a write outside the new folder.
func writeSet(base *os.Root, name string, files map[string]File) error {
	root, err := base.OpenRoot(name)
	if err != nil {
		return err
	}
	defer root.Close()
	for p, f := range files {
		if err := writeFile(root, p, f); err != nil {
			return fmt.Errorf("%q: %w", p, err)
		}
	}
	return nil
}

func writeFile(root *os.Root, name string, f File) error {
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	fh, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, f.Mode.Perm())
	if err != nil {
		return err
	}
	if _, err := fh.Write(f.Data); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Chmod(f.Mode.Perm()); err != nil { // the umask must not change the mode
		fh.Close()
		return err
	}
	return fh.Close()
}

func setSize(files map[string]File) int64 {
	var n int64
	for _, f := range files {
		n += int64(len(f.Data))
	}
	return n
}

// withHint adds what to do about the disk errors a config root meets in practice: a volume
// that is full, mounted read-only, or owned by another user.
func withHint(err error, root string, need int64) error {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		needs := ""
		if need > 0 {
			needs = fmt.Sprintf(" the new config needs %d bytes besides the live one;", need)
		}
		return fmt.Errorf("%w:%s enlarge the volume under %s (an emptyDir's sizeLimit) or free space on it", err, needs, root)
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%w: %s is mounted read-only; the reloader's volumeMount must be writable (readOnly: false)", err, root)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: the reloader's user may not write under %s; give the pod an fsGroup that owns the volume, or run the reloader as its owner", err, root)
	}
	return err
}
