package source

// Reading a mounted folder as the app sees it: the names kubelet's atomic writer shows
// (through ..data) or a plain tree, each file read with O_NONBLOCK so that a FIFO swapped in
// never blocks, and the digests the folder source compares.

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// FileDigest is what a Folder object holds for each file: the SHA-256 of its bytes, not the
// bytes. The app reads the files where they are, so the reloader keeps only what tells a
// change, and its memory does not grow with the folders (the Prometheus Operator gives its
// sidecar 50 MiB, and rule files can take 20). ReadVerified reads a file's bytes when they
// are needed. A name the app sees that holds no file (a link that dangles or loops, such as a
// removed key's name before kubelet removes it) is held with a nil digest: the app's glob finds
// it and its read fails, so it is part of what the app sees.
func FileDigest(b []byte) []byte {
	sum := sha256.Sum256(b)
	return sum[:]
}

// ReadVerified reads the file at path, bounded, and checks that it is the one digest describes.
// Only a regular file is read (openForRead).
func ReadVerified(path string, digest []byte) ([]byte, error) {
	fd, err := openForRead(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFolderBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxFolderBytes {
		return nil, fmt.Errorf("read %s: larger than %d MiB", path, maxFolderBytes>>20)
	}
	if !bytes.Equal(FileDigest(b), digest) {
		return nil, fmt.Errorf("read %s: %w", path, ErrChangedSinceRead)
	}
	return b, nil
}

// ReadFolder returns the digests (FileDigest) of the files under dir by path relative to it,
// read as one consistent set.
// A folder of kubelet's atomic writer is read through ..data, resolved once and checked again
// after; a swap in between is waited out by reading again. What is read is what the app sees:
// the files under the names in dir, a name that dangles with a nil digest. Files whose relative
// path or base name matches an ignore glob, names that start with "..", and links to folders
// other than kubelet's are left out.
func ReadFolder(dir string, ignore []string) (map[string][]byte, error) {
	files, _, err := readFolder(dir, ignore)
	return files, err
}

// readFolder is ReadFolder that also returns the ..data target the files were read through,
// when the names in dir were those of the set it names; "" for a plain folder, or one whose
// names kubelet has not yet put in place.
func readFolder(dir string, ignore []string) (map[string][]byte, string, error) {
	var err error
	for try := 0; try < 20; try++ {
		var files map[string][]byte
		var version string
		files, version, err = readFolderOnce(dir, ignore)
		if !errors.Is(err, errSwapped) {
			return files, version, err
		}
		time.Sleep(time.Duration(try+1) * 5 * time.Millisecond)
	}
	return nil, "", fmt.Errorf("read %s: %w, again and again for a second", dir, err)
}

func readFolderOnce(dir string, ignore []string) (map[string][]byte, string, error) {
	link := filepath.Join(dir, kubeletDataLink)
	target, err := os.Readlink(link)
	if err != nil {
		if st, err := os.Stat(dir); err != nil {
			return nil, "", fmt.Errorf("read %s: %w", dir, err)
		} else if !st.IsDir() {
			return nil, "", fmt.Errorf("read %s: not a folder; name the folder that holds the files", dir)
		}
		// A plain folder (a hostPath, a CSI driver's files, an editor's rename): read it as it is.
		t := newTreeReader(dir, ignore)
		err := t.dir(dir, "")
		switch {
		case errors.Is(err, errDataGone):
			return nil, "", fmt.Errorf("read %s: %w", dir, err)
		case errors.Is(err, fs.ErrNotExist):
			return nil, "", errSwapped
		case err != nil:
			return nil, "", err
		}
		return t.files, "", nil
	}
	names, complete, err := namesOf(dir, dataPath(dir, target), ignore)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", errSwapped // the folder ..data named was removed after a swap
	}
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", dir, err)
	}
	t := newTreeReader(dir, ignore)
	for _, n := range names {
		if n.dangles {
			t.files[n.name] = nil
			continue
		}
		if err := t.entry(n.path, n.name, n.typ); errors.Is(err, fs.ErrNotExist) {
			return nil, "", errSwapped // a file vanished: the folder ..data named was removed, or a name
		} else if err != nil {
			return nil, "", err
		}
	}
	if again, err := os.Readlink(link); err != nil || again != target {
		return nil, "", errSwapped
	}
	if !complete {
		target = "" // the names are not yet those of the set: no Swap covers what was read
	}
	return t.files, target, nil
}

// dataPath is the folder the ..data link of dir names, with target its text.
func dataPath(dir, target string) string {
	if filepath.IsAbs(target) {
		return target
	}
	return filepath.Join(dir, target)
}

// visibleName is one name the app sees in a kubelet volume's folder.
type visibleName struct {
	name    string
	path    string      // where its content is read: through the set ..data names, for kubelet's links
	typ     fs.FileMode // its type in the listing of where it is read
	dangles bool        // kubelet's link to a key the set does not have: a removed key's
}

// namesOf lists the names the app sees in dir (those not ignored, and not kubelet's own) and
// how they stand against the set in data, the folder ..data names. A name kubelet linked,
// NAME -> ..data/NAME, is read through data, resolved once, so that the set read is consistent.
// complete: every key of the set has its name in dir (kubelet's step 10 done), and none of
// kubelet's names dangles (step 11 done). A name that is not kubelet's link is read as it is:
// kubelet never replaces it, so waiting for it would be waiting for ever.
func namesOf(dir, data string, ignore []string) ([]visibleName, bool, error) {
	set, err := setKeys(data, ignore)
	if err != nil {
		return nil, false, err
	}
	keys := make(map[string]fs.FileMode, len(set))
	for _, e := range set {
		keys[e.Name()] = e.Type()
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, false, err
	}
	complete := true
	names := make([]visibleName, 0, len(entries))
	for _, e := range entries {
		n := visibleName{name: e.Name(), path: filepath.Join(dir, e.Name()), typ: e.Type()}
		if hasKubeletName(n.name) || ignored(n.name, ignore) {
			continue
		}
		if n.typ&fs.ModeSymlink != 0 {
			if to, err := os.Readlink(n.path); err == nil && to == path.Join(kubeletDataLink, n.name) {
				typ, ok := keys[n.name]
				n.path, n.typ, n.dangles = filepath.Join(data, n.name), typ, !ok
				complete = complete && ok
			}
		}
		delete(keys, n.name)
		names = append(names, n)
	}
	return names, complete && len(keys) == 0, nil
}

// setKeys lists the top-level keys of the set in data, the folder ..data names, in name order:
// the names kubelet links in the volume's folder (those not ignored, and not kubelet's own).
func setKeys(data string, ignore []string) ([]fs.DirEntry, error) {
	entries, err := os.ReadDir(data)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(entries, func(e fs.DirEntry) bool {
		return hasKubeletName(e.Name()) || ignored(e.Name(), ignore)
	}), nil
}

// treeReader reads files into digests by slash path, at most maxFolderBytes in all.
type treeReader struct {
	root   string // the folder read, for errors
	ignore []string
	files  map[string][]byte
	total  int64
}

func newTreeReader(root string, ignore []string) *treeReader {
	return &treeReader{root: root, ignore: ignore, files: map[string][]byte{}}
}

// dir reads every regular file under the folder p (following links to files), rel being p's
// path in the set.
func (t *treeReader) dir(p, rel string) error {
	entries, err := os.ReadDir(p)
	if errors.Is(err, syscall.ENOTDIR) {
		// Swapped since the listing that found a folder (os.ReadDir opens with O_DIRECTORY, so
		// a FIFO there is refused at once); read again, the listing leaves the new thing out.
		return fmt.Errorf("%w: %w", errSwapped, err)
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if hasKubeletName(e.Name()) {
			continue
		}
		if err := t.entry(filepath.Join(p, e.Name()), path.Join(rel, e.Name()), e.Type()); err != nil {
			return err
		}
	}
	return nil
}

// entry reads the file or folder at p, rel being its path in the set and typ its type in its
// folder's listing (no stat for plain files and folders).
func (t *treeReader) entry(p, rel string, typ fs.FileMode) error {
	if ignored(rel, t.ignore) {
		return nil
	}
	if typ&fs.ModeSymlink != 0 {
		st, err := os.Stat(p) // through the link
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
			to, err := os.Readlink(p)
			if err != nil {
				return err // the link itself is gone: a change under way
			}
			if !strings.Contains(rel, "/") && to == path.Join(kubeletDataLink, rel) {
				return errDataGone
			}
			t.files[rel] = nil // it dangles or loops: a name the app sees that holds no file
			return nil
		}
		if err != nil {
			return err
		}
		if typ = st.Mode().Type(); typ.IsDir() {
			return nil // a link to a folder: left out
		}
	}
	switch {
	case typ.IsDir():
		return t.dir(p, rel)
	case typ.IsRegular():
		sum, n, err := digestFile(p, maxFolderBytes-t.total)
		if errors.Is(err, errNotRegular) {
			// Swapped since the listing; read again, the listing leaves the new thing out.
			return fmt.Errorf("%w: %w", errSwapped, err)
		}
		if err != nil {
			return err
		}
		if t.total += n; t.total > maxFolderBytes {
			return fmt.Errorf("read %s: it holds more than %d MiB; leave the large files out with an ignore glob", t.root, maxFolderBytes>>20)
		}
		t.files[rel] = sum
	}
	return nil // a FIFO, socket or device: no file of the set
}

// digestFile hashes the file at p, reading at most budget+1 bytes: past the budget the caller
// refuses the folder, so nothing more is worth reading. It reads with plain system calls:
// os.Open first tries, and fails, to register a regular file with the network poller, four
// more calls per file, a good part of the time a kubelet swap of a few small files took.
func digestFile(p string, budget int64) ([]byte, int64, error) {
	fd, err := openForRead(p)
	if err != nil {
		return nil, 0, err
	}
	defer syscall.Close(fd)
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	h := sha256.New()
	var n int64
	for n <= budget {
		chunk := (*buf)[:min(int64(len(*buf)), budget+1-n)]
		m, err := syscall.Read(fd, chunk)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, 0, &fs.PathError{Op: "read", Path: p, Err: err}
		}
		if m == 0 {
			break
		}
		h.Write(chunk[:m])
		n += int64(m)
	}
	return h.Sum(nil), n, nil
}

// openForRead opens the regular file at p. A listing said what p was, but a container sharing
// the folder may have put a FIFO there since: a plain open of a FIFO waits for a writer, for
// ever, and the watch with it. O_NONBLOCK makes that open return at once (and changes nothing
// for a regular file), and fstat on what was opened refuses anything but a regular file.
func openForRead(p string) (int, error) {
	for {
		fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: p, Err: err}
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			syscall.Close(fd)
			return -1, &fs.PathError{Op: "stat", Path: p, Err: err}
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			syscall.Close(fd)
			return -1, &fs.PathError{Op: "open", Path: p, Err: errNotRegular}
		}
		return fd, nil
	}
}

func hasKubeletName(rel string) bool { return strings.HasPrefix(rel, "..") }

func ignored(rel string, globs []string) bool {
	base := path.Base(rel)
	for _, g := range globs {
		if ok, _ := path.Match(g, rel); ok {
			return true
		}
		if ok, _ := path.Match(g, base); ok {
			return true
		}
	}
	return false
}

// maxFolderBytes bounds what one folder may hold, and so the time one read of it takes. Only
// digests are kept, so memory does not grow with it.
const maxFolderBytes = 64 << 20

// ErrChangedSinceRead means a file no longer holds what the last read of its folder found: a
// change is under way, which the source will signal.
var ErrChangedSinceRead = errors.New("the file changed since its folder was read")

// errNotRegular means a name that a listing gave as a regular file (or a link to one) held
// something else when it was opened: a FIFO, socket or device put in its place.
var errNotRegular = errors.New("not a regular file: a FIFO, socket or device in its place is never read")

// copyBuffers are digestFile's read buffers: a fresh 32 KiB for every file (as io.Copy takes)
// cost more, in a process that was idle until the swap, than reading a small file.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
