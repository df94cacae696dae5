package source

// The folder source: config that is already on disk, in folders that kubelet, a CSI driver or
// cert-manager mounts, or plain folders. It needs no API access.
//
// Why folders and not files: a watch on a file follows the link it was given when it was set
// up, and dies silently when kubelet removes the folder behind that link. So each folder is
// watched (its real subfolders too, and its parent, to see the folder itself removed and made
// again), any event leads to a fresh read of the whole folder, and only a read whose content
// differs from the last one published is a change.
//
// A kubelet volume is read as kubelet's atomic writer makes it consistent: ..data is resolved
// once, every file is read through the folder it names, and ..data is checked again after; a
// swap in between, or a file that vanished mid-read, means a swap is under way: read again.
// Names that start with ".." are kubelet's own and never files of the set.
//
// What is read is what the app sees: the files under the names in the folder. kubelet renames
// ..data (its step 9) before it links a new key's name NAME -> ..data/NAME (step 10) and before
// it removes a removed key's name (step 11), which dangles until then. So a swap is complete
// for the app only once the names are those of the set ..data names; until then a new key is
// not in what is read, and a dangling name is (with no digest), so that the names kubelet puts
// right are a change. The swap is read, and reported, when its names are in place: at once
// when no name changes (the common case), on the event of the last name otherwise, and after
// LinkWait whatever the names, as the app sees them then.
//
// Without ignore globs, a kubelet swap is also reported on Swaps before the folders are read,
// with the ..data targets it left: a reloader that may tell the app of any swap (configmap-reload
// tells it of every one) tells it at once, and lets the read that follows confirm the set.
//
// Nothing is lost when inotify is: on a queue overflow or a watcher error every folder is read
// again at once, and again every Interval whatever happened.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/fsnotify/fsnotify"
	"k8s.io/klog/v2"
)

// Folder is the kind of a Ref that names a folder on disk; its Name is the folder's path.
const Folder configref.Kind = "Folder"

// kubeletDataLink is the link kubelet's atomic writer renames over to swap a volume's content.
const kubeletDataLink = "..data"

// maxSettle bounds the settle wait: a file written to without a pause (a log, a tool in a loop)
// would otherwise push the read back for ever. A longer Settle is its own bound.
const maxSettle = time.Second

// FolderOptions tunes a Folders source.
type FolderOptions struct {
	// Ignore lists globs (path.Match) of files whose changes are not changes of the config,
	// matched against a file's path relative to its folder and against its base name, e.g. a
	// projected service-account token, which kubelet rotates every hour with a real ..data swap.
	Ignore []string
	// Interval is how often every folder is read again even without an event (the
	// --watch-interval of prometheus-config-reloader); 0 never.
	Interval time.Duration
	// Settle is how long after an event the folder is read, so that the writes of one editor
	// or tool land in one read. A kubelet swap (..data renamed) is read at once: it is complete.
	Settle time.Duration
	// OnEvent is called for each event from the file system watcher (metrics).
	OnEvent func()
	// OnError is called for each watcher error, overflows included (metrics).
	OnError func(error)
	// OnWatches is called with the number of folders watched whenever it may have changed.
	OnWatches func(n int)
	// LinkWait is how long a kubelet swap waits for kubelet to link its new names and remove
	// its old ones (steps 10 and 11 of its atomic writer, which follow the swap at once unless
	// a step failed) before the folder is read as the app sees it then; default 1s.
	LinkWait time.Duration
}

// Swap is a kubelet swap seen in a folder, reported once the names the app sees in the folder
// are those of the new set: the ..data target of every folder ("" for a folder without one, or
// whose names are not yet its set's), resolved after the swap was seen and before anything was
// read. A target names a set that is never written again (kubelet's atomic writer makes a new
// timestamped folder for each swap), so a snapshot whose Objects carry the same Versions holds
// exactly the files that were on disk, under the same names, when the Swap was made.
type Swap struct {
	Versions map[string]string // folder → ..data target
}

// Folders watches folders on disk and hands out snapshots of their files.
type Folders struct {
	dirs    []string
	opts    FolderOptions
	watcher *fsnotify.Watcher
	changed chan struct{}
	swaps   chan Swap     // the latest swap not taken yet; an older one is replaced
	synced  chan struct{} // closed after the first read

	mu        sync.Mutex
	snap      Snapshot
	published [sha256.Size]byte
	read1     bool              // a read was published
	failing   map[string]string // folder → read error last logged

	// linked holds, for each folder, the top-level keys of the last set whose names swapDone
	// found in place; only Run's goroutine uses it.
	linked map[string][]string
}

// NewFolders prepares a watch of dirs. The watcher is made here so that a system out of inotify
// instances fails the start with a clear error; Run closes it.
func NewFolders(dirs []string, opts FolderOptions) (*Folders, error) {
	if err := CheckIgnore(opts.Ignore); err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w (the node may be out of inotify instances: fs.inotify.max_user_instances)", strings.Join(dirs, ", "), err)
	}
	clean := make([]string, len(dirs))
	for i, d := range dirs {
		clean[i] = filepath.Clean(d)
	}
	if opts.Settle <= 0 {
		opts.Settle = 50 * time.Millisecond
	}
	if opts.LinkWait <= 0 {
		opts.LinkWait = time.Second
	}
	return &Folders{dirs: clean, opts: opts, watcher: w, changed: make(chan struct{}, 1),
		swaps: make(chan Swap, 1), synced: make(chan struct{}), failing: map[string]string{},
		linked: map[string][]string{}}, nil
}

// CheckIgnore checks ignore globs.
func CheckIgnore(globs []string) error {
	for _, g := range globs {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("ignore glob %q: %w", g, err)
		}
	}
	return nil
}

// ReadNow reads every folder now, without publishing what it read: to see that a set is still
// the one on disk.
func (f *Folders) ReadNow() Snapshot { return f.readAll(false) }

func (f *Folders) readAll(logErrors bool) Snapshot {
	var s Snapshot
	for _, d := range f.dirs {
		ref := configref.Ref{Kind: Folder, Name: d}
		files, version, err := readFolder(d, f.opts.Ignore)
		if logErrors {
			f.logReadError(d, err)
		}
		if err != nil {
			s.Missing = append(s.Missing, ref)
			continue
		}
		s.Objects = append(s.Objects, Object{Ref: ref, Data: files, Version: version})
	}
	return s
}

// Changed receives a value after the content of a folder changed, or, while swaps are reported
// (Swaps), after a swap. Signals are merged.
func (f *Folders) Changed() <-chan struct{} { return f.changed }

// Swaps receives the latest kubelet swap seen, before the read that follows it is published on
// Changed. Nothing needs to take it: the read signals Changed whatever happens here.
func (f *Folders) Swaps() <-chan Swap { return f.swaps }

// WaitForSync blocks until every folder was read once, or ctx ends (then it returns false).
func (f *Folders) WaitForSync(ctx context.Context) bool {
	select {
	case <-f.synced:
		return true
	case <-ctx.Done():
		return false
	}
}

// Snapshot returns the files of every folder as last read. A folder that does not exist, or
// cannot be read, is Missing; the reloader keeps its last set until it is back.
func (f *Folders) Snapshot() Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap
}

// Run watches until ctx ends, then closes the watcher.
func (f *Folders) Run(ctx context.Context) {
	defer f.watcher.Close()
	f.arm()
	for _, d := range f.dirs {
		f.swapDone(d) // learns the keys whose names are in place, for the first swap
	}
	f.read()
	close(f.synced)

	var tick <-chan time.Time
	if f.opts.Interval > 0 {
		t := time.NewTicker(f.opts.Interval)
		defer t.Stop()
		tick = t.C
	}
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	defer settle.Stop()
	var waiting time.Time // since when a read waits for things to settle; zero: none waits
	read := func() {
		settle.Stop()
		waiting = time.Time{}
		f.read()
	}
	// pending holds the folders whose swap was seen while their names were not yet the new
	// set's. Their swap is reported and read on the event that puts the last name in place, or
	// once linkWait fires; meanwhile a settled read waits for it, so as not to read the names
	// kubelet is about to put right.
	pending := map[string]bool{}
	linkWait := time.NewTimer(time.Hour)
	linkWait.Stop()
	defer linkWait.Stop()
	swapped := func(d, target string) {
		delete(pending, d)
		if len(pending) == 0 {
			linkWait.Stop()
		}
		f.reportSwap(d, target)
		read()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-f.watcher.Events:
			if !ok {
				return
			}
			if f.opts.OnEvent != nil {
				f.opts.OnEvent()
			}
			klog.V(4).InfoS("file event", "path", ev.Name, "op", ev.Op.String())
			d, kind := f.classify(ev)
			switch kind {
			case eventSwap:
				if target, done := f.swapDone(d); done {
					swapped(d, target)
					break
				}
				if len(pending) == 0 {
					linkWait.Reset(f.opts.LinkWait)
				}
				pending[d] = true
				klog.V(4).InfoS("kubelet swapped ..data; waiting for it to put the names of the new set in place", "folder", d)
			case eventFolder:
				clear(f.linked) // a folder made again holds names no swap was seen to make
				f.arm()
				read()
			case eventContent:
				if ev.Has(fsnotify.Create) {
					f.arm() // a new subfolder needs a watch of its own
				}
				if pending[d] {
					if target, done := f.swapDone(d); done {
						swapped(d, target)
						break
					}
				}
				now := time.Now()
				if waiting.IsZero() {
					waiting = now
				}
				settle.Reset(settleWait(f.opts.Settle, now.Sub(waiting)))
			}
		case err, ok := <-f.watcher.Errors:
			if !ok {
				return
			}
			if f.opts.OnError != nil {
				f.opts.OnError(err)
			}
			klog.ErrorS(err, "file watcher error; reading every folder again", "folders", strings.Join(f.dirs, ", "))
			clear(f.linked) // swaps may have gone unseen: list the names at the next one
			f.arm()
			read()
		case <-settle.C:
			if len(pending) == 0 {
				read()
			}
		case <-linkWait.C:
			for d := range pending {
				klog.InfoS("kubelet swapped ..data but has not put the names of the new set in place; reading what the app sees", "folder", d, "waited", f.opts.LinkWait)
			}
			clear(pending)
			read()
		case <-tick:
			f.arm()
			read()
		}
	}
}

// reportSwap offers a Swap on Swaps, replacing one not taken yet, and lets the taker run before
// the read: on one core (the reloader's default) it would otherwise wait out the whole read.
// The swap was seen in folder swapped, whose names were found in place with ..data at target.
// With ignore globs a swap may change only ignored files (a projected token rotated), which is
// no change to tell: such a swap is known only once it is read.
func (f *Folders) reportSwap(swapped, target string) {
	if !f.reportsSwaps() {
		return
	}
	sw := Swap{Versions: make(map[string]string, len(f.dirs))}
	for _, d := range f.dirs {
		if d == swapped {
			sw.Versions[d] = target
		} else if t, done := f.swapDone(d); done {
			sw.Versions[d] = t
		} else {
			sw.Versions[d] = "" // read, it has no version either: the pass tells the app of it
		}
	}
	select {
	case <-f.swaps: // only this goroutine sends, so the send below cannot block
	default:
	}
	f.swaps <- sw
	runtime.Gosched()
}

func (f *Folders) reportsSwaps() bool { return len(f.opts.Ignore) == 0 }

// swapDone returns the ..data target of the folder d, and whether the names the app sees in d
// are those of the set it names: each of its keys has its name, and no name of kubelet's
// dangles.
//
// A set with the same keys as the last one whose names were in place needs no name changed
// (kubelet links only new keys and removes only removed ones), so only the new set is listed:
// the listing of d itself waits, right after a swap, for kubelet's removal of the old
// timestamped folder (a quarter of a millisecond, as long as the rest of the swap's report).
// Only Run's goroutine calls it.
func (f *Folders) swapDone(d string) (string, bool) {
	target, err := os.Readlink(filepath.Join(d, kubeletDataLink))
	if err != nil {
		return "", false
	}
	data := dataPath(d, target)
	set, err := setKeys(data, f.opts.Ignore)
	if err != nil {
		return "", false
	}
	keys := make([]string, len(set))
	for i, e := range set {
		keys[i] = e.Name()
	}
	if prev, ok := f.linked[d]; ok && slices.Equal(prev, keys) {
		return target, true
	}
	_, complete, err := namesOf(d, data, f.opts.Ignore)
	if err != nil || !complete {
		delete(f.linked, d) // a set between may leave names the next one's keys do not show
		return target, false
	}
	f.linked[d] = keys
	return target, true
}

// settleWait is how long to wait, after an event, before reading: settle after the last event,
// but never longer after the first one not read yet than maxSettle, or settle when longer.
func settleWait(settle, waited time.Duration) time.Duration {
	return max(min(settle, max(maxSettle, settle)-waited), 0)
}

type eventKind int

const (
	eventNone    eventKind = iota
	eventSwap              // kubelet renamed a new ..data into place: read it once its names are
	eventFolder            // a watched folder itself appeared or went
	eventContent           // something in a folder changed: read once things settle
)

// classify says what an event means for the folders, and which folder it is in.
func (f *Folders) classify(ev fsnotify.Event) (string, eventKind) {
	name := filepath.Clean(ev.Name)
	for _, d := range f.dirs {
		if name == d {
			return d, eventFolder
		}
		rel, err := filepath.Rel(d, name)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		if ev.Op == fsnotify.Chmod {
			return d, eventNone // modes are not content
		}
		if rel == kubeletDataLink {
			if ev.Has(fsnotify.Create) {
				return d, eventSwap // renamed over the old one (inotify's IN_MOVED_TO), or made
			}
			// Removed or renamed away: kubelet never does either while the volume lives, but
			// removes it with the volume. No set to report; the read finds what is left.
			return d, eventContent
		}
		if hasKubeletName(rel) {
			return d, eventNone // kubelet's timestamped folders and ..data_tmp
		}
		return d, eventContent
	}
	return "", eventNone // another entry of a watched folder's parent
}

// arm makes sure every folder, its real subfolders and its parent are watched. Adding a watch
// that exists is harmless, so this runs after anything that may have removed one.
func (f *Folders) arm() {
	for _, d := range f.dirs {
		if parent := filepath.Dir(d); parent != d {
			_ = f.watcher.Add(parent) // best effort: only to see d removed and made again
		}
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil // gone meanwhile, or unreadable: the read reports it
			}
			if !e.IsDir() {
				return nil
			}
			if p != d && hasKubeletName(e.Name()) {
				return filepath.SkipDir // kubelet's timestamped folders are reached through ..data
			}
			if err := f.watcher.Add(p); err != nil {
				klog.ErrorS(err, "cannot watch folder; changes in it are seen only by the periodic read", "folder", p)
			}
			return nil
		})
	}
	if f.opts.OnWatches != nil {
		f.opts.OnWatches(len(f.watcher.WatchList()))
	}
}

// read reads every folder, and publishes and signals the result when its content changed.
func (f *Folders) read() { f.publish(f.readAll(true)) }

// publish makes s the snapshot and signals a change when its content differs from the last.
func (f *Folders) publish(s Snapshot) {
	sum := digest(s, f.reportsSwaps())
	f.mu.Lock()
	same := f.read1 && sum == f.published
	if !same {
		f.snap, f.published, f.read1 = s, sum, true
	}
	f.mu.Unlock()
	if !same {
		select {
		case f.changed <- struct{}{}:
		default:
		}
	}
}

// logReadError logs a folder's read error once, and once more when it is gone.
func (f *Folders) logReadError(dir string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if f.failing[dir] == msg {
		return
	}
	if err != nil {
		klog.ErrorS(err, "cannot read folder; keeping its last content until it can be read", "folder", dir)
		f.failing[dir] = msg
	} else {
		klog.InfoS("folder readable again", "folder", dir)
		delete(f.failing, dir)
	}
}

// digest identifies a snapshot's content: which folders are missing, and every file's path and
// bytes. Only a change of it is a change. With versions (when swaps are reported), each folder's
// ..data target too: a swap to the same files is then signalled, so that a reloader which told
// the app of the swap is sure to see the read that confirms it, and not take its request for
// a later change read in that folder.
func digest(s Snapshot, versions bool) [sha256.Size]byte {
	h := sha256.New()
	for _, m := range s.Missing {
		fmt.Fprintf(h, "missing:%d:%s\n", len(m.Name), m.Name)
	}
	for _, o := range s.Objects {
		keys := make([]string, 0, len(o.Data))
		for k := range o.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(h, "folder:%d:%s:%d\n", len(o.Name), o.Name, len(keys))
		if versions {
			fmt.Fprintf(h, "version:%d:%s\n", len(o.Version), o.Version)
		}
		for _, k := range keys {
			fmt.Fprintf(h, "%d:%s:%d:", len(k), k, len(o.Data[k]))
			h.Write(o.Data[k])
		}
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// errSwapped means the folder changed while it was read: a kubelet swap or a rename was under way.
var errSwapped = errors.New("the folder changed while it was read")

// errDataGone means a folder's names link through ..data, which is gone: kubelet never removes
// it while the volume lives, only with the volume. Nothing the app could read is there.
var errDataGone = errors.New("its names link through ..data, which is gone (kubelet is removing the volume)")
