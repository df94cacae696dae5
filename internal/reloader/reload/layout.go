package reload

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/reloader/source"
	"github.com/configwave/configwave/internal/reloader/unpack"
)

// Layout says where each key of each source lands under the config root.
type Layout struct {
	// PerObject puts each object's keys in a folder named after the object; otherwise all
	// keys share the root, as in a projected volume.
	PerObject bool
	// Items places a key at a relative path instead of at its own name; applies to that key
	// in every source (the original k8s-config-controller's items).
	Items map[string]string
	// ConfigMapMode and SecretMode are the files' permission bits.
	ConfigMapMode, SecretMode fs.FileMode
	// Isolate (selector mode) leaves an object that cannot be laid out out of the set, and
	// lays out the others, instead of failing the whole set: objects that anyone may add by
	// labelling one must not freeze everyone else's config. Objects are taken in snapshot
	// order (kind, namespace, name); of two that would write one path, or one folder, the
	// first keeps it.
	Isolate bool
	// FolderAnnotation names an annotation whose value is the folder an object's files go
	// to (k8s-sidecar's FOLDER_ANNOTATION): relative to the root, or absolute under Root.
	// The source must keep it (apisource.Options.Annotations).
	FolderAnnotation string
	// Root is the config root as the app sees it, for absolute folder annotations.
	Root string
	// UniqueFilenames names each file namespace_NS.KIND_NAME.KEY, so that keys of objects
	// from several namespaces never clash (k8s-sidecar's UNIQUE_FILENAMES).
	UniqueFilenames bool
}

// LeftOut is an object a Layout left out of the set, and why. Why names objects, keys and
// paths, never a value.
type LeftOut struct {
	Ref configref.Ref
	Why string
}

// Files turns a snapshot into the file set for unpack.Writer. A key that is not a valid file
// name, or two keys that would land on the same path (or one on a file, one in a folder of
// that name), fail the whole set with an error that names the objects and keys; with Isolate,
// the object at fault is left out instead. No value ever appears in either.
func (l Layout) Files(objects []source.Object) (map[string]unpack.File, []LeftOut, error) {
	files := map[string]unpack.File{}
	c := claims{files: map[string]string{}, dirs: map[string]string{}, folders: map[string]configref.Ref{}}
	var left []LeftOut
	for _, o := range objects {
		own, folder, err := l.objectFiles(o)
		if err == nil {
			err = c.check(o.Ref, folder, own)
		}
		if err != nil {
			if !l.Isolate {
				return nil, nil, err
			}
			left = append(left, LeftOut{Ref: o.Ref, Why: err.Error()})
			continue
		}
		c.claim(o.Ref, folder, own)
		for p, f := range own {
			files[p] = f.File
		}
	}
	return files, left, nil
}

// annotatedFolder is the folder the object's folder annotation names, relative to the root.
func (l Layout) annotatedFolder(o source.Object) (string, error) {
	v, ok := o.Annotations[l.FolderAnnotation]
	if l.FolderAnnotation == "" || !ok || strings.TrimSpace(v) == "" {
		return "", nil
	}
	v = strings.TrimSpace(v)
	if path.IsAbs(v) {
		root := path.Clean(l.Root)
		rel, ok := strings.CutPrefix(path.Clean(v), root)
		if l.Root == "" || !ok || rel != "" && rel[0] != '/' {
			return "", fmt.Errorf("%s annotation %s=%q is outside the config root %q: give a folder under it, or a relative one", o.Ref, l.FolderAnnotation, v, l.Root)
		}
		v = strings.TrimPrefix(rel, "/")
		if v == "" {
			return "", nil
		}
	}
	if err := unpack.ValidatePath(v); err != nil {
		return "", fmt.Errorf("%s annotation %s=%q: %w", o.Ref, l.FolderAnnotation, v, err)
	}
	return path.Clean(v), nil
}

// ownedFile is a file of one object, with the key it comes from, for errors.
type ownedFile struct {
	unpack.File
	who string // `configmap ns/name key "k"`
}

// objectFiles lays out one object's keys, or says why it cannot be; folder is the object's
// own folder (per-object), "" when it shares one.
func (l Layout) objectFiles(o source.Object) (own map[string]ownedFile, folder string, err error) {
	mode := l.ConfigMapMode
	if o.Kind == configref.Secret {
		mode = l.SecretMode
	}
	dir, err := l.annotatedFolder(o)
	if err != nil {
		return nil, "", err
	}
	if l.PerObject {
		dir = path.Join(dir, o.Name)
		folder = dir
	}
	own = map[string]ownedFile{}
	keys := slices.Sorted(maps.Keys(o.Data))
	c := claims{files: map[string]string{}, dirs: map[string]string{}}
	for _, k := range keys {
		rel := k
		if p, ok := l.Items[k]; ok {
			rel = p
		} else if err := validKey(k); err != nil {
			return nil, "", fmt.Errorf("%s key %q: %w; rename the key or map it with --items %s=PATH", o.Ref, k, err, k)
		}
		if l.UniqueFilenames {
			rel = path.Join(path.Dir(rel), "namespace_"+o.Namespace+"."+o.Kind.Lower()+"_"+o.Name+"."+path.Base(rel))
		}
		p := path.Join(dir, rel)
		if err := unpack.ValidatePath(p); err != nil {
			return nil, "", fmt.Errorf("%s key %q: %w", o.Ref, k, err)
		}
		who := fmt.Sprintf("%s key %q", o.Ref, k)
		if err := c.checkPath(p, who); err != nil {
			return nil, "", err
		}
		c.claimPath(p, who)
		own[p] = ownedFile{File: unpack.File{Data: o.Data[k], Mode: mode}, who: who}
	}
	return own, folder, nil
}

// claims are the paths and folders taken so far, each with who took it.
type claims struct {
	files   map[string]string // path -> who
	dirs    map[string]string // every folder some file needs -> who first needed it
	folders map[string]configref.Ref
}

func (c claims) check(ref configref.Ref, folder string, own map[string]ownedFile) error {
	if folder != "" {
		if other, clash := c.folders[folder]; clash {
			return fmt.Errorf("%s and %s would both unpack into folder %q: select only one, or use --layout=flat", other, ref, folder)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(own)) {
		if err := c.checkPath(p, own[p].who); err != nil {
			return err
		}
	}
	return nil
}

func (c claims) checkPath(p, who string) error {
	if other, clash := c.files[p]; clash {
		return fmt.Errorf("%s and %s would both unpack to %q: rename one, map one with --items, or use --layout=per-object", other, who, p)
	}
	if other, clash := c.dirs[p]; clash {
		return fmt.Errorf("%s would be a file at %q, where %s needs a folder: rename one, or map one with --items", who, p, other)
	}
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if other, clash := c.files[d]; clash {
			return fmt.Errorf("%s needs a folder at %q, where %s is a file: rename one, or map one with --items", who, d, other)
		}
	}
	return nil
}

func (c claims) claim(ref configref.Ref, folder string, own map[string]ownedFile) {
	if folder != "" {
		c.folders[folder] = ref
	}
	for p, f := range own {
		c.claimPath(p, f.who)
	}
}

func (c claims) claimPath(p, who string) {
	c.files[p] = who
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if _, ok := c.dirs[d]; !ok {
			c.dirs[d] = who
		}
	}
}

// UnusedItems lists the Items keys that no object has, sorted: most likely a misspelt key,
// whose file the app will not find.
func (l Layout) UnusedItems(objects []source.Object) []string {
	var unused []string
	for k := range l.Items {
		found := false
		for _, o := range objects {
			if _, ok := o.Data[k]; ok {
				found = true
				break
			}
		}
		if !found {
			unused = append(unused, k)
		}
	}
	sort.Strings(unused)
	return unused
}

// validKey accepts a key that can be a file name of its own. The API server already limits
// keys to [-._a-zA-Z0-9]+, but the reloader may face an older or more lenient server.
func validKey(k string) error {
	if k == "" || k == "." || k == ".." {
		return fmt.Errorf("%q is not a valid file name", k)
	}
	for _, c := range k {
		if c == '/' || c == 0 {
			return fmt.Errorf("a file name cannot contain %q", c)
		}
	}
	return unpack.ValidatePath(k)
}

// Hash identifies a file set: SHA256 over sorted paths, modes and contents. Two equal sets
// have the same hash whatever order their keys came in.
func Hash(files map[string]unpack.File) string { return KeyedHash(nil, files) }

// KeyedHash is Hash as HMAC-SHA256 under key when key is not empty. The hash is shown in
// logs, Events and a metric label; when Secrets are among the sources, an unkeyed hash would
// let anyone who sees it test guesses of a short Secret value.
func KeyedHash(key []byte, files map[string]unpack.File) string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	h := sha256.New()
	if len(key) > 0 {
		h = hmac.New(sha256.New, key)
	}
	for _, p := range paths {
		f := files[p]
		fmt.Fprintf(h, "%d:%s:%o:%d:", len(p), p, f.Mode, len(f.Data))
		h.Write(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}
