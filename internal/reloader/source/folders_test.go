package source

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/testenv/testvolume"
)

// digests is what a Folder object holds for files of this content.
func digests(m map[string]string) map[string][]byte {
	b := make(map[string][]byte, len(m))
	for k, v := range m {
		b[k] = FileDigest([]byte(v))
	}
	return b
}

// holds reports whether the last read of dir found name holding content.
func holds(f *Folders, dir, name, content string) bool {
	return bytes.Equal(folderFiles(f, dir)[name], FileDigest([]byte(content)))
}

func TestReadFolder(t *testing.T) {
	kubelet := func(t *testing.T) string {
		d := t.TempDir()
		require.NoError(t, testvolume.New(d).Write(map[string]string{"a.yml": "A", "rules/r.yml": "R", "token": "T"}))
		return d
	}
	plain := func(t *testing.T) string {
		d := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(d, "rules"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, "a.yml"), []byte("A"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(d, "rules", "r.yml"), []byte("R"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(d, "..hidden"), []byte("H"), 0o644))
		other := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(other, "linked"), []byte("L"), 0o644))
		require.NoError(t, os.Symlink(filepath.Join(other, "linked"), filepath.Join(d, "linked")))
		require.NoError(t, os.Symlink(other, filepath.Join(d, "linked-folder")))
		return d
	}
	for _, tc := range []struct {
		name   string
		dir    func(t *testing.T) string
		ignore []string
		want   map[string]string
	}{
		{"a kubelet volume is read through ..data, its own names left out", kubelet, nil,
			map[string]string{"a.yml": "A", "rules/r.yml": "R", "token": "T"}},
		{"an ignore glob matches a base name", kubelet, []string{"tok*"},
			map[string]string{"a.yml": "A", "rules/r.yml": "R"}},
		{"an ignore glob matches a relative path", kubelet, []string{"rules/*"},
			map[string]string{"a.yml": "A", "token": "T"}},
		{"a plain folder: files, subfolders and links to files; no links to folders, no .. names", plain, nil,
			map[string]string{"a.yml": "A", "rules/r.yml": "R", "linked": "L"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadFolder(tc.dir(t), tc.ignore)
			require.NoError(t, err)
			assert.Equal(t, digests(tc.want), got)
		})
	}
}

func TestReadFolderErrorsNameTheFolder(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	_, err := ReadFolder(missing, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), missing)

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err = ReadFolder(file, nil)
	require.ErrorContains(t, err, "not a folder")
}

// A read at any point of kubelet's swap sees what the app sees there: the old set, or the new
// set's content under the names in place so far (kubelet links a new key's name a step after
// the swap, and removes a removed key's a step later; until then it dangles), never the content
// of one set in one file and of the other in another.
func TestReadFolderBetweenEveryStepOfASwap(t *testing.T) {
	oldSet := map[string]string{"a": "old-a", "b": "old-b", "gone": "x"}
	newSet := map[string]string{"a": "new-a", "b": "new-b", "added": "y"}
	dangling := func(m map[string][]byte) map[string][]byte { m["gone"] = nil; return m }
	// What a read sees once steps[:stop] ran: up to the swap, the old set.
	want := []map[string][]byte{
		testvolume.SwapData:            digests(oldSet),
		testvolume.SwapData + 1:        dangling(digests(map[string]string{"a": "new-a", "b": "new-b"})),
		testvolume.LinkNewNames + 1:    dangling(digests(newSet)),
		testvolume.RemoveOldNames + 1:  digests(newSet),
		testvolume.RemoveOldFolder + 1: digests(newSet),
	}
	for stop := range want[:testvolume.SwapData] {
		want[stop] = digests(oldSet)
	}
	for stop := range want {
		d := t.TempDir()
		v := testvolume.New(d)
		require.NoError(t, v.Write(oldSet))
		steps := v.Steps(newSet)
		require.NoError(t, testvolume.Run(steps[:stop]))
		got, err := ReadFolder(d, nil)
		require.NoError(t, err, "after %d steps", stop)
		assert.Equal(t, want[stop], got, "after %d steps", stop)
		require.NoError(t, testvolume.Run(steps[stop:]))
	}
}

// Reads racing a writer that swaps as fast as it can: each read is what the app sees at some
// step, never the content of both sets.
func TestReadFolderDuringSwaps(t *testing.T) {
	d := t.TempDir()
	v := testvolume.New(d)
	sets := []map[string]string{{"a": "1", "b": "1"}, {"a": "2", "b": "2", "c": "2"}}
	require.NoError(t, v.Write(sets[0]))
	cDangles := digests(sets[0])
	cDangles["c"] = nil
	seen := []map[string][]byte{
		digests(sets[0]), digests(sets[1]),
		cDangles, // set 0 swapped in, c's name not removed yet
		digests(map[string]string{"a": "2", "b": "2"}), // set 1 swapped in, c's name not linked yet
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := v.Write(sets[i%2]); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 300; i++ {
		got, err := ReadFolder(d, nil)
		require.NoError(t, err)
		if !assert.Contains(t, seen, got) {
			break
		}
	}
	close(stop)
	wg.Wait()
}

// folders runs a Folders source on dirs until the test ends.
func folders(t *testing.T, opts FolderOptions, dirs ...string) *Folders {
	t.Helper()
	f, err := NewFolders(dirs, opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	require.True(t, f.WaitForSync(ctx))
	<-f.Changed() // the first read
	return f
}

func waitChange(t *testing.T, f *Folders, why string) {
	t.Helper()
	select {
	case <-f.Changed():
	case <-time.After(10 * time.Second):
		t.Fatalf("no change signalled: %s", why)
	}
}

func noChange(t *testing.T, f *Folders, why string) {
	t.Helper()
	select {
	case <-f.Changed():
		t.Fatalf("a change was signalled: %s", why)
	case <-time.After(300 * time.Millisecond):
	}
}

func folderFiles(f *Folders, dir string) map[string][]byte {
	for _, o := range f.Snapshot().Objects {
		if o.Name == dir {
			return o.Data
		}
	}
	return nil
}

func TestFoldersSignalsOnlyChangesOfContent(t *testing.T) {
	d := t.TempDir()
	v := testvolume.New(d)
	require.NoError(t, v.Write(map[string]string{"app.yml": "v1", "token": "t1"}))
	f := folders(t, FolderOptions{Ignore: []string{"token"}}, d)
	assert.Equal(t, digests(map[string]string{"app.yml": "v1"}), folderFiles(f, d))

	require.NoError(t, v.Write(map[string]string{"app.yml": "v2", "token": "t1"}))
	waitChange(t, f, "a swap with new content")
	assert.Equal(t, digests(map[string]string{"app.yml": "v2"}), folderFiles(f, d))

	require.NoError(t, v.Write(map[string]string{"app.yml": "v2", "token": "t1"}))
	noChange(t, f, "a swap with the same content")
	require.NoError(t, v.Write(map[string]string{"app.yml": "v2", "token": "t2"}))
	noChange(t, f, "a rotation of an ignored token")

	for i := 0; i < 20; i++ {
		require.NoError(t, v.Write(map[string]string{"app.yml": "burst-" + string(rune('a'+i))}))
	}
	require.Eventually(t, func() bool {
		return holds(f, d, "app.yml", "burst-t")
	}, 10*time.Second, 10*time.Millisecond, "the last of a burst of swaps")
}

// Without ignore globs a swap is reported before it is read, with the ..data target it left:
// the one the read that follows carries. A swap to the same files is signalled too, so that the
// reloader sees the read that confirms a request sent on the swap.
func TestFoldersReportSwapsBeforeTheRead(t *testing.T) {
	d, plain := t.TempDir(), t.TempDir()
	v := testvolume.New(d)
	require.NoError(t, v.Write(map[string]string{"app.yml": "v1"}))
	f := folders(t, FolderOptions{}, d, plain)
	for _, files := range []map[string]string{{"app.yml": "v2"}, {"app.yml": "v2"}} {
		require.NoError(t, v.Write(files))
		var sw Swap
		select {
		case sw = <-f.Swaps():
		case <-time.After(10 * time.Second):
			t.Fatal("no swap reported")
		}
		waitChange(t, f, "a swap")
		target, err := os.Readlink(filepath.Join(d, "..data"))
		require.NoError(t, err)
		assert.Equal(t, map[string]string{d: target, plain: ""}, sw.Versions)
		for _, o := range f.Snapshot().Objects {
			assert.Equal(t, sw.Versions[o.Name], o.Version, "the read of %s went through the target the swap left", o.Name)
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(plain, "b"), []byte("b"), 0o644))
	waitChange(t, f, "a file written in a plain folder")
	select {
	case <-f.Swaps():
		t.Fatal("only a kubelet swap is reported")
	default:
	}
}

func TestFoldersWithIgnoreGlobsReportNoSwap(t *testing.T) {
	d := t.TempDir()
	v := testvolume.New(d)
	require.NoError(t, v.Write(map[string]string{"app.yml": "v1", "token": "t1"}))
	f := folders(t, FolderOptions{Ignore: []string{"token"}}, d)
	require.NoError(t, v.Write(map[string]string{"app.yml": "v1", "token": "t2"}))
	noChange(t, f, "a rotated token")
	select {
	case <-f.Swaps():
		t.Fatal("a swap may change only ignored files: it is known once read")
	default:
	}
}

func TestFoldersPlainFolderAndEditorRename(t *testing.T) {
	d := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(d, "nginx.conf"), []byte("v1"), 0o644))
	f := folders(t, FolderOptions{}, d)

	// An editor writes a temporary file and renames it into place.
	tmp := filepath.Join(d, ".nginx.conf.swp")
	require.NoError(t, os.WriteFile(tmp, []byte("v2"), 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(d, "nginx.conf")))
	waitChange(t, f, "a file renamed into place")
	assert.Equal(t, digests(map[string]string{"nginx.conf": "v2"}), folderFiles(f, d))

	// A new subfolder is watched too.
	require.NoError(t, os.Mkdir(filepath.Join(d, "conf.d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(d, "conf.d", "a.conf"), []byte("a"), 0o644))
	waitChange(t, f, "a file in a new subfolder")
	require.Eventually(t, func() bool { return holds(f, d, "conf.d/a.conf", "a") }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, os.WriteFile(filepath.Join(d, "conf.d", "a.conf"), []byte("b"), 0o644))
	require.Eventually(t, func() bool { return holds(f, d, "conf.d/a.conf", "b") }, 10*time.Second, 10*time.Millisecond,
		"a write inside the new subfolder")
}

func TestFoldersFolderRemovedAndMadeAgain(t *testing.T) {
	d := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.Mkdir(d, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(d, "a"), []byte("v1"), 0o644))
	f := folders(t, FolderOptions{}, d)

	require.NoError(t, os.RemoveAll(d))
	waitChange(t, f, "the folder removed")
	assert.Equal(t, []configref.Ref{{Kind: Folder, Name: d}}, f.Snapshot().Missing)

	require.NoError(t, os.Mkdir(d, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(d, "a"), []byte("v2"), 0o644))
	require.Eventually(t, func() bool { return holds(f, d, "a", "v2") }, 10*time.Second, 10*time.Millisecond,
		"the folder made again")
	// The new folder is watched: a later write is seen without waiting for a periodic read.
	require.NoError(t, os.WriteFile(filepath.Join(d, "a"), []byte("v3"), 0o644))
	require.Eventually(t, func() bool { return holds(f, d, "a", "v3") }, 10*time.Second, 10*time.Millisecond,
		"a write in the folder made again")
}

// With its watch gone (as after an inotify overflow), a change is still found: at once when the
// watcher reports the error, and by the periodic read when nothing reports anything.
func TestFoldersNeverLoseAChange(t *testing.T) {
	t.Run("watcher error", func(t *testing.T) {
		d := t.TempDir()
		v := testvolume.New(d)
		require.NoError(t, v.Write(map[string]string{"a": "v1"}))
		var errs []error
		var mu sync.Mutex
		f := folders(t, FolderOptions{OnError: func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }}, d)
		require.NoError(t, f.watcher.Remove(d))
		require.NoError(t, v.Write(map[string]string{"a": "v2"}))
		noChange(t, f, "no watch, no error yet")
		f.watcher.Errors <- fsnotify.ErrEventOverflow
		waitChange(t, f, "after an overflow")
		assert.True(t, holds(f, d, "a", "v2"))
		mu.Lock()
		assert.Equal(t, []error{fsnotify.ErrEventOverflow}, errs)
		mu.Unlock()
		// The watch is armed again.
		require.NoError(t, v.Write(map[string]string{"a": "v3"}))
		waitChange(t, f, "a swap after the overflow")
	})
	t.Run("periodic read", func(t *testing.T) {
		d := t.TempDir()
		v := testvolume.New(d)
		require.NoError(t, v.Write(map[string]string{"a": "v1"}))
		f := folders(t, FolderOptions{Interval: 200 * time.Millisecond}, d)
		require.NoError(t, f.watcher.Remove(d))
		require.NoError(t, v.Write(map[string]string{"a": "v2"}))
		waitChange(t, f, "the periodic read")
		assert.True(t, holds(f, d, "a", "v2"))
	})
}

func TestNewFoldersRefusesABadGlob(t *testing.T) {
	_, err := NewFolders([]string{t.TempDir()}, FolderOptions{Ignore: []string{"[a-"}})
	require.ErrorContains(t, err, `ignore glob "[a-"`)
}

// The folder source keeps digests, never contents, reads no more of a folder than its bound,
// and ReadVerified gives a file's bytes only while they are still what the read found.
func TestFolderReadsAreBounded(t *testing.T) {
	d := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(d, "rules.yml"), []byte("groups: []"), 0o644))
	got, err := ReadFolder(d, nil)
	require.NoError(t, err)
	assert.Len(t, got["rules.yml"], 32, "a SHA-256, whatever the size of the file")

	b, err := ReadVerified(filepath.Join(d, "rules.yml"), got["rules.yml"])
	require.NoError(t, err)
	assert.Equal(t, "groups: []", string(b))
	require.NoError(t, os.WriteFile(filepath.Join(d, "rules.yml"), []byte("groups: [x]"), 0o644))
	_, err = ReadVerified(filepath.Join(d, "rules.yml"), got["rules.yml"])
	require.ErrorIs(t, err, ErrChangedSinceRead)

	big := t.TempDir()
	f, err := os.Create(filepath.Join(big, "huge"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(maxFolderBytes+1)) // sparse: no disk used
	require.NoError(t, f.Close())
	_, err = ReadFolder(big, nil)
	require.ErrorContains(t, err, "more than 64 MiB; leave the large files out with an ignore glob")
	require.ErrorContains(t, err, big)
	_, err = ReadVerified(filepath.Join(big, "huge"), nil)
	require.ErrorContains(t, err, "larger than 64 MiB")
}

func TestSettleWait(t *testing.T) {
	for _, tt := range []struct {
		name           string
		settle, waited time.Duration
		want           time.Duration
	}{
		{"the first event: settle", 50 * time.Millisecond, 0, 50 * time.Millisecond},
		{"events keep coming: still settle", 50 * time.Millisecond, 500 * time.Millisecond, 50 * time.Millisecond},
		{"near the bound: what is left of it", 50 * time.Millisecond, 980 * time.Millisecond, 20 * time.Millisecond},
		{"past the bound: read now", 50 * time.Millisecond, 3 * time.Second, 0},
		{"a settle longer than the bound is its own bound", 5 * time.Second, 4 * time.Second, time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, settleWait(tt.settle, tt.waited)) })
	}
}

// A file written without a pause, faster than the settle time, is read all the same.
func TestFoldersReadAFileWrittenWithoutPause(t *testing.T) {
	d := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(d, "app.log"), []byte("0"), 0o644))
	f := folders(t, FolderOptions{Settle: 200 * time.Millisecond}, d)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if err := os.WriteFile(filepath.Join(d, "app.log"), fmt.Appendf(nil, "%d", i), 0o644); err != nil {
				t.Error(err)
				return
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	waitChange(t, f, "the writes never pause for 200 ms, yet a read comes within the bound")
}

// nextSwap waits for the next swap reported.
func nextSwap(t *testing.T, f *Folders, why string) Swap {
	t.Helper()
	select {
	case sw := <-f.Swaps():
		return sw
	case <-time.After(10 * time.Second):
		t.Fatalf("no swap reported: %s", why)
		return Swap{}
	}
}

func noSwap(t *testing.T, f *Folders, why string) {
	t.Helper()
	select {
	case sw := <-f.Swaps():
		t.Fatalf("a swap was reported (%v): %s", sw.Versions, why)
	case <-time.After(300 * time.Millisecond):
	}
}

// kubelet renames ..data (its step 9) before it links a new key's name (10) and removes a
// removed key's (11). A swap is reported, and read, once the names the app sees are the new
// set's: at the rename when no name changes (configmap-reload's latency), after the last name
// otherwise. Reported earlier, the app would reload without the new key, or with a name that
// cannot be read, and nothing would tell it again.
func TestFoldersReportASwapOnceTheAppSeesItsNames(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new map[string]string
		// reported is the step after which the swap is reported: SwapData, LinkNewNames or
		// RemoveOldNames.
		reported int
	}{
		{"new content under the same names: reported at the rename", map[string]string{"a.yml": "1", "rules/r.yml": "1"},
			map[string]string{"a.yml": "2", "rules/r.yml": "2"}, testvolume.SwapData},
		{"a new key: reported once its name is linked", map[string]string{"a.yml": "1"},
			map[string]string{"a.yml": "2", "added.yml": "2"}, testvolume.LinkNewNames},
		{"a new folder of keys: reported once its name is linked", map[string]string{"a.yml": "1"},
			map[string]string{"a.yml": "1", "rules/r.yml": "2"}, testvolume.LinkNewNames},
		{"a removed key: reported once its dangling name is gone", map[string]string{"a.yml": "1", "gone.yml": "1"},
			map[string]string{"a.yml": "2"}, testvolume.RemoveOldNames},
		{"a key added and one removed: reported once both names are right", map[string]string{"a.yml": "1", "gone.yml": "1"},
			map[string]string{"a.yml": "1", "added.yml": "2"}, testvolume.RemoveOldNames},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			v := testvolume.New(d)
			require.NoError(t, v.Write(tc.old))
			// The steps before the report take a noSwap wait each: LinkWait must not run out
			// meanwhile, however slow the machine (its expiry: TestReloaderTellsAStalledSwap...).
			f := folders(t, FolderOptions{LinkWait: time.Minute}, d)
			steps := v.Steps(tc.new)
			require.NoError(t, testvolume.Run(steps[:testvolume.SwapData]))
			for step := testvolume.SwapData; step <= testvolume.RemoveOldNames; step++ {
				require.NoError(t, steps[step].Do(), steps[step].Name)
				if step < tc.reported {
					noSwap(t, f, "after "+steps[step].Name)
					continue
				}
				sw := nextSwap(t, f, "after "+steps[step].Name)
				target, err := os.Readlink(filepath.Join(d, "..data"))
				require.NoError(t, err)
				assert.Equal(t, map[string]string{d: target}, sw.Versions)
				waitChange(t, f, "the read after the swap")
				assert.Equal(t, digests(tc.new), folderFiles(f, d), "the read holds the new set under the names the app sees")
				break
			}
			require.NoError(t, testvolume.Run(steps[tc.reported+1:]))
			noSwap(t, f, "the steps after the swap")
		})
	}
}

// The source remembers the keys of the last set whose names it found in place, and a swap to a
// set with the same keys is reported at the rename without listing the folder (that listing
// waits for kubelet's removal of the old timestamped folder). Keys that change in between are
// checked again, each time, by the names.
func TestFoldersReportSwapsRightAcrossKeyChanges(t *testing.T) {
	d := t.TempDir()
	v := testvolume.New(d)
	require.NoError(t, v.Write(map[string]string{"a.yml": "0"}))
	f := folders(t, FolderOptions{LinkWait: time.Minute}, d) // as in TestFoldersReportASwapOnceTheAppSeesItsNames
	for i, tc := range []struct {
		set      map[string]string
		reported int
	}{
		{map[string]string{"a.yml": "1"}, testvolume.SwapData},
		{map[string]string{"a.yml": "2", "b.yml": "2"}, testvolume.LinkNewNames},
		{map[string]string{"a.yml": "3", "b.yml": "3"}, testvolume.SwapData},
		{map[string]string{"a.yml": "4"}, testvolume.RemoveOldNames},
		{map[string]string{"a.yml": "5"}, testvolume.SwapData},
		{map[string]string{"b.yml": "6"}, testvolume.RemoveOldNames},
	} {
		steps := v.Steps(tc.set)
		require.NoError(t, testvolume.Run(steps[:testvolume.SwapData]))
		for step := testvolume.SwapData; step <= tc.reported; step++ {
			require.NoError(t, steps[step].Do(), steps[step].Name)
			if step < tc.reported {
				noSwap(t, f, fmt.Sprintf("set %d, after %s", i, steps[step].Name))
			}
		}
		nextSwap(t, f, fmt.Sprintf("set %d, after %s", i, steps[tc.reported].Name))
		waitChange(t, f, "the read after the swap")
		assert.Equal(t, digests(tc.set), folderFiles(f, d), "set %d", i)
		require.NoError(t, testvolume.Run(steps[tc.reported+1:]))
	}
}

// A Remove of ..data (kubelet tearing the volume down) is no swap: nothing is reported, and
// the folder, whose names all link through ..data, reads as missing: the last set stays.
func TestFoldersRemovedDataLinkIsNoSwap(t *testing.T) {
	d := t.TempDir()
	v := testvolume.New(d)
	require.NoError(t, v.Write(map[string]string{"app.yml": "v1"}))
	f := folders(t, FolderOptions{}, d)
	require.NoError(t, os.Remove(filepath.Join(d, "..data")))
	noSwap(t, f, "..data removed")
	waitChange(t, f, "the folder can no longer be read")
	assert.Equal(t, []configref.Ref{{Kind: Folder, Name: d}}, f.Snapshot().Missing)
}

// A link that dangles or loops is a name the app sees that holds no file: a nil digest, not a
// folder that cannot be read at all (which kept the last set for as long as the link stayed).
func TestReadFolderNamesALinkThatDangles(t *testing.T) {
	for _, tc := range []struct {
		name string
		link string // the link's target
	}{
		{"to nothing", "nothing"},
		{"to itself", "broken.yml"},
		{"through a file", "a.yml/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(d, "a.yml"), []byte("A"), 0o644))
			require.NoError(t, os.Symlink(tc.link, filepath.Join(d, "broken.yml")))
			got, err := ReadFolder(d, nil)
			require.NoError(t, err)
			assert.Equal(t, map[string][]byte{"a.yml": FileDigest([]byte("A")), "broken.yml": nil}, got)
		})
	}
}

// A file of a folder may be swapped for a FIFO (a container sharing the folder) between the
// listing that found a regular file and the open: the open must not wait for a writer, and the
// read names the path. The FIFO stands here where the open expects a file; a blocked open is
// woken at the end by a writer, so that a failing run ends.
func TestOpeningAFileSwappedForAFIFODoesNotBlock(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(p string) error
	}{
		{"a folder read's digest", func(p string) error { _, _, err := digestFile(p, maxFolderBytes); return err }},
		{"ReadVerified, for the config file to render", func(p string) error { _, err := ReadVerified(p, nil); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "rules.yml")
			require.NoError(t, syscall.Mkfifo(p, 0o644))
			done := make(chan error, 1)
			go func() { done <- tc.open(p) }()
			select {
			case err := <-done:
				require.Error(t, err)
				assert.Contains(t, err.Error(), p)
				assert.Contains(t, err.Error(), "not a regular file")
			case <-time.After(10 * time.Second):
				if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					w.Close()
				}
				<-done
				t.Fatal("the open blocked on the FIFO until a writer came")
			}
		})
	}
}

// The same for a folder swapped for a FIFO between the listing that found a folder and the
// listing of that folder, by a read or by the walk that watches subfolders: os.ReadDir opens
// with O_DIRECTORY, which refuses a FIFO at once, and the read lists again.
func TestListingAFolderSwappedForAFIFODoesNotBlock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rules")
	require.NoError(t, syscall.Mkfifo(p, 0o644))
	done := make(chan error, 1)
	go func() { _, err := os.ReadDir(p); done <- err }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, syscall.ENOTDIR)
		assert.Contains(t, err.Error(), p)
	case <-time.After(10 * time.Second):
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatal("the listing blocked on the FIFO until a writer came")
	}
	// A read meeting it reads the folder again, and its listing leaves the FIFO out.
	err := newTreeReader(p, nil).dir(p, "rules")
	require.ErrorIs(t, err, errSwapped)
}

// A FIFO, socket or device among a folder's files is no file of the set.
func TestReadFolderLeavesOutAFIFO(t *testing.T) {
	d := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(d, "a.yml"), []byte("A"), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(d, "pipe.yml"), 0o644))
	got, err := ReadFolder(d, nil)
	require.NoError(t, err)
	assert.Equal(t, digests(map[string]string{"a.yml": "A"}), got)
}

func TestFolderRefString(t *testing.T) {
	assert.Equal(t, "folder /etc/app", configref.Ref{Kind: Folder, Name: "/etc/app"}.String())
}
