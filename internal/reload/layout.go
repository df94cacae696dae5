package reload

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"sort"

	"github.com/configwave/configwave/internal/configref"
	"github.com/configwave/configwave/internal/source"
	"github.com/configwave/configwave/internal/unpack"
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
}

// Files turns a snapshot into the file set for unpack.Writer. A key that is not a valid file
// name, or two keys that would land on the same path, fail the whole set with an error that
// names the objects and keys; no value ever appears in it.
func (l Layout) Files(objects []source.Object) (map[string]unpack.File, error) {
	files := map[string]unpack.File{}
	owner := map[string]string{} // path -> "configmap ns/name key k", for clash errors
	folders := map[string]configref.Ref{}
	for _, o := range objects {
		mode := l.ConfigMapMode
		if o.Kind == configref.Secret {
			mode = l.SecretMode
		}
		dir := ""
		if l.PerObject {
			dir = o.Name
			if other, clash := folders[dir]; clash {
				return nil, fmt.Errorf("%s and %s would both unpack into folder %q: select only one, or use --layout=flat", other, o.Ref, dir)
			}
			folders[dir] = o.Ref
		}
		keys := make([]string, 0, len(o.Data))
		for k := range o.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			rel := k
			if p, ok := l.Items[k]; ok {
				rel = p
			} else if err := validKey(k); err != nil {
				return nil, fmt.Errorf("%s key %q: %w; rename the key or map it with --items %s=PATH", o.Ref, k, err, k)
			}
			p := path.Join(dir, rel)
			if err := unpack.ValidatePath(p); err != nil {
				return nil, fmt.Errorf("%s key %q: %w", o.Ref, k, err)
			}
			who := fmt.Sprintf("%s key %q", o.Ref, k)
			if other, clash := owner[p]; clash {
				return nil, fmt.Errorf("%s and %s would both unpack to %q: rename one, map one with --items, or use --layout=per-object", other, who, p)
			}
			owner[p] = who
			files[p] = unpack.File{Data: o.Data[k], Mode: mode}
		}
	}
	return files, nil
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
