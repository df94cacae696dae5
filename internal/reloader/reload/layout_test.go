package reload

import (
	"maps"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/reloader/source"
	"github.com/configwave/configwave/internal/reloader/unpack"
)

func cm(ns, name string, kv ...string) source.Object {
	o := source.Object{Ref: configref.Ref{Kind: configref.ConfigMap, Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for i := 0; i+1 < len(kv); i += 2 {
		o.Data[kv[i]] = []byte(kv[i+1])
	}
	return o
}

func secret(ns, name string, kv ...string) source.Object {
	o := cm(ns, name, kv...)
	o.Kind = configref.Secret
	return o
}

func TestLayoutFiles(t *testing.T) {
	modes := Layout{ConfigMapMode: 0o644, SecretMode: 0o600}
	perObject := modes
	perObject.PerObject = true
	withItems := modes
	withItems.Items = map[string]string{"nginx.conf": "nginx/nginx.conf", "x": "../escape"}

	tests := []struct {
		name    string
		layout  Layout
		objects []source.Object
		want    map[string]unpack.File
		wantErr string
	}{
		{
			name:    "flat merges keys of all sources with per-kind modes",
			layout:  modes,
			objects: []source.Object{cm("web", "app", "app.yaml", "a: 1"), secret("web", "tls", "tls.key", "KEY")},
			want: map[string]unpack.File{
				"app.yaml": {Data: []byte("a: 1"), Mode: 0o644},
				"tls.key":  {Data: []byte("KEY"), Mode: 0o600},
			},
		},
		{
			name:    "flat clash names both objects and the key, never the value",
			layout:  modes,
			objects: []source.Object{cm("web", "a", "app.yaml", "one"), secret("web", "b", "app.yaml", "hunter2")},
			wantErr: `configmap web/a key "app.yaml" and secret web/b key "app.yaml" would both unpack to "app.yaml"`,
		},
		{
			name:    "per-object puts each object in its own folder",
			layout:  perObject,
			objects: []source.Object{cm("mon", "dash-a", "a.json", "{}"), cm("mon", "dash-b", "a.json", "[]")},
			want: map[string]unpack.File{
				"dash-a/a.json": {Data: []byte("{}"), Mode: 0o644},
				"dash-b/a.json": {Data: []byte("[]"), Mode: 0o644},
			},
		},
		{
			name:    "per-object folder clash across namespaces names both",
			layout:  perObject,
			objects: []source.Object{cm("a", "dash", "x", "1"), cm("b", "dash", "y", "2")},
			wantErr: `configmap a/dash and configmap b/dash would both unpack into folder "dash"`,
		},
		{
			name:    "items place a key at a nested path",
			layout:  withItems,
			objects: []source.Object{cm("web", "nginx", "nginx.conf", "events {}", "mime.types", "types {}")},
			want: map[string]unpack.File{
				"nginx/nginx.conf": {Data: []byte("events {}"), Mode: 0o644},
				"mime.types":       {Data: []byte("types {}"), Mode: 0o644},
			},
		},
		{
			name:    "an item path outside the root is rejected with object and key",
			layout:  withItems,
			objects: []source.Object{cm("web", "nginx", "x", "1")},
			wantErr: `configmap web/nginx key "x"`,
		},
		{
			name:    "a key that is not a file name is rejected with object and key",
			layout:  modes,
			objects: []source.Object{cm("web", "app", "..data", "1")},
			wantErr: `configmap web/app key "..data"`,
		},
		{
			name:    "binary content is kept byte-exact",
			layout:  modes,
			objects: []source.Object{{Ref: configref.Ref{Kind: configref.ConfigMap, Namespace: "n", Name: "b"}, Data: map[string][]byte{"blob": {0, 0xff, '\n'}}}},
			want:    map[string]unpack.File{"blob": {Data: []byte{0, 0xff, '\n'}, Mode: 0o644}},
		},
		{
			name:    "a key on a file where another needs a folder",
			layout:  withItems,
			objects: []source.Object{cm("web", "a", "nginx", "x"), cm("web", "b", "nginx.conf", "y")},
			wantErr: `configmap web/b key "nginx.conf" needs a folder at "nginx", where configmap web/a key "nginx" is a file`,
		},
		{
			name:    "... and the other way round",
			layout:  withItems,
			objects: []source.Object{cm("web", "a", "nginx.conf", "y"), cm("web", "b", "nginx", "x")},
			wantErr: `configmap web/b key "nginx" would be a file at "nginx", where configmap web/a key "nginx.conf" needs a folder`,
		},
		{
			name:    "... within one object",
			layout:  withItems,
			objects: []source.Object{cm("web", "a", "nginx", "x", "nginx.conf", "y")},
			wantErr: `configmap web/a key "nginx.conf" needs a folder at "nginx", where configmap web/a key "nginx" is a file`,
		},
		{name: "no sources, no files", layout: modes, want: map[string]unpack.File{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, left, err := tt.layout.Files(tt.objects)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.NotContains(t, err.Error(), "hunter2")
				return
			}
			require.NoError(t, err)
			assert.Empty(t, left)
			assert.Equal(t, tt.want, got)
		})
	}
}

// With Isolate (selector mode), an object that cannot be laid out is left out, with why, and
// every other object is laid out: of two that clash, the first in snapshot order keeps the
// path.
func TestLayoutIsolatesObjects(t *testing.T) {
	flat := Layout{ConfigMapMode: 0o644, SecretMode: 0o600, Isolate: true, Items: map[string]string{"x": "../escape"}}
	perObject := flat
	perObject.PerObject = true
	tests := []struct {
		name     string
		layout   Layout
		objects  []source.Object
		want     []string // paths laid out
		wantLeft map[string]string
	}{
		{
			name:   "per-object: the same name in two namespaces; the first namespace keeps the folder",
			layout: perObject,
			objects: []source.Object{cm("a", "dash", "d.json", "1"), cm("a", "other", "o.json", "2"),
				cm("b", "dash", "d.json", "hunter2"), cm("b", "more", "m.json", "3")},
			want:     []string{"dash/d.json", "more/m.json", "other/o.json"},
			wantLeft: map[string]string{"configmap b/dash": `configmap a/dash and configmap b/dash would both unpack into folder "dash"`},
		},
		{
			name:     "flat: a key two objects have; the first keeps it",
			layout:   flat,
			objects:  []source.Object{cm("a", "one", "app.yaml", "1", "one.yaml", "1"), secret("a", "two", "app.yaml", "hunter2", "two.yaml", "2")},
			want:     []string{"app.yaml", "one.yaml"},
			wantLeft: map[string]string{"secret a/two": `configmap a/one key "app.yaml" and secret a/two key "app.yaml" would both unpack to "app.yaml"`},
		},
		{
			name:     "a bad key leaves its whole object out, never half of it",
			layout:   flat,
			objects:  []source.Object{cm("a", "bad", "good.yaml", "1", "x", "2"), cm("a", "fine", "f.yaml", "3")},
			want:     []string{"f.yaml"},
			wantLeft: map[string]string{"configmap a/bad": `configmap a/bad key "x"`},
		},
		{
			name:     "an object left out claims nothing",
			layout:   flat,
			objects:  []source.Object{cm("a", "bad", "shared.yaml", "1", "x", "2"), cm("a", "later", "shared.yaml", "3")},
			want:     []string{"shared.yaml"},
			wantLeft: map[string]string{"configmap a/bad": `configmap a/bad key "x"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, left, err := tt.layout.Files(tt.objects)
			require.NoError(t, err)
			assert.ElementsMatch(t, tt.want, slices.Collect(maps.Keys(files)))
			got := map[string]string{}
			for _, l := range left {
				got[l.Ref.String()] = l.Why
				assert.NotContains(t, l.Why, "hunter2")
			}
			require.Len(t, got, len(tt.wantLeft))
			for ref, why := range tt.wantLeft {
				assert.Contains(t, got[ref], why)
			}
		})
	}
}

// k8s-sidecar's folder annotation and unique file names.
func TestLayoutFolderAnnotationAndUniqueFilenames(t *testing.T) {
	const ann = "k8s-sidecar-target-directory"
	in := func(o source.Object, folder string) source.Object {
		o.Annotations = map[string]string{ann: folder}
		return o
	}
	l := Layout{ConfigMapMode: 0o644, Isolate: true, FolderAnnotation: ann, Root: "/tmp/dashboards"}
	files, left, err := l.Files([]source.Object{
		in(cm("mon", "a", "a.json", "1"), "Team A"),
		in(cm("mon", "b", "b.json", "2"), "/tmp/dashboards/Team B/sub"),
		in(cm("mon", "c", "c.json", "3"), "/tmp/dashboards"),
		in(cm("mon", "d", "d.json", "4"), "  "),
		cm("mon", "e", "e.json", "5"),
		in(cm("mon", "out", "o.json", "6"), "/etc"),
		in(cm("mon", "prefix", "p.json", "7"), "/tmp/dashboards-other"),
		in(cm("mon", "up", "u.json", "8"), "../x"),
		in(cm("mon", "dots", "u.json", "9"), "a/../../x"),
	})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"Team A/a.json", "Team B/sub/b.json", "c.json", "d.json", "e.json"}, slices.Collect(maps.Keys(files)))
	why := map[string]string{}
	for _, lo := range left {
		why[lo.Ref.Name] = lo.Why
	}
	assert.Contains(t, why["out"], `configmap mon/out annotation k8s-sidecar-target-directory="/etc" is outside the config root "/tmp/dashboards"`)
	assert.Contains(t, why["prefix"], "is outside the config root")
	assert.Contains(t, why["up"], `annotation k8s-sidecar-target-directory="../x"`)
	assert.Contains(t, why["dots"], `annotation k8s-sidecar-target-directory="a/../../x"`)
	assert.Len(t, left, 4)

	l = Layout{ConfigMapMode: 0o644, SecretMode: 0o600, UniqueFilenames: true, FolderAnnotation: ann, Items: map[string]string{"n": "sub/n.conf"}}
	files, left, err = l.Files([]source.Object{cm("a", "dash", "d.json", "1", "n", "x"), in(cm("b", "dash", "d.json", "2"), "B"), secret("a", "dash", "d.json", "3")})
	require.NoError(t, err)
	assert.Empty(t, left)
	assert.ElementsMatch(t, []string{"namespace_a.configmap_dash.d.json", "sub/namespace_a.configmap_dash.n.conf", "B/namespace_b.configmap_dash.d.json", "namespace_a.secret_dash.d.json"},
		slices.Collect(maps.Keys(files)), "k8s-sidecar's names: the same key from three objects never clashes")

	perObject := Layout{ConfigMapMode: 0o644, PerObject: true, FolderAnnotation: ann}
	files, _, err = perObject.Files([]source.Object{in(cm("a", "dash", "d.json", "1"), "A"), in(cm("b", "dash", "d.json", "2"), "B")})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"A/dash/d.json", "B/dash/d.json"}, slices.Collect(maps.Keys(files)), "per object, under each annotated folder")
}

func TestUnusedItems(t *testing.T) {
	l := Layout{Items: map[string]string{"nginx.conf": "a", "ngnix.conf": "b", "tls.key": "c"}}
	assert.Equal(t, []string{"ngnix.conf"}, l.UnusedItems([]source.Object{cm("web", "app", "nginx.conf", "x"), secret("web", "tls", "tls.key", "k")}))
	assert.Empty(t, Layout{}.UnusedItems([]source.Object{cm("web", "app", "a", "x")}))
}

func TestHash(t *testing.T) {
	a := map[string]unpack.File{"a": {Data: []byte("1"), Mode: 0o644}, "b": {Data: []byte("2"), Mode: 0o644}}
	same := map[string]unpack.File{"b": {Data: []byte("2"), Mode: 0o644}, "a": {Data: []byte("1"), Mode: 0o644}}
	assert.Equal(t, Hash(a), Hash(same))
	// Moving a byte between content and name must change the hash.
	shifted := map[string]unpack.File{"a": {Data: []byte("12"), Mode: 0o644}, "b": {Data: []byte(""), Mode: 0o644}}
	assert.NotEqual(t, Hash(a), Hash(shifted))
	mode := map[string]unpack.File{"a": {Data: []byte("1"), Mode: 0o600}, "b": {Data: []byte("2"), Mode: 0o644}}
	assert.NotEqual(t, Hash(a), Hash(mode))
	// Pinned: the hash is exported as a metric; a change would look like a config change.
	assert.Equal(t, "0a0caade3d147f52ff4ef26fb2d04772355d3c93e3d127ec9aee7b3a9a861c92", Hash(a))
}

func TestKeyedHash(t *testing.T) {
	files := map[string]unpack.File{"tls.key": {Data: []byte("s3cr3t"), Mode: 0o600}}
	plain := Hash(files)
	keyed := KeyedHash([]byte("k1"), files)
	assert.NotEqual(t, plain, keyed, "a key changes the hash")
	assert.Equal(t, keyed, KeyedHash([]byte("k1"), files), "and keeps it stable within a process")
	assert.NotEqual(t, keyed, KeyedHash([]byte("k2"), files))
}

// Keys come from objects anyone with write access to a watched ConfigMap can shape, and items
// from flags: whatever they are, Files never panics, every path it accepts stays inside the
// root, and an error never repeats a value.
func FuzzLayoutFiles(f *testing.F) {
	f.Add("app.yaml", "b", "app.yaml", "conf/app.yaml", "obj", false)
	f.Add("..data", "a/b", "x", "../x", "a", true)
	f.Add("a", "a", "", "", "..", true)
	f.Fuzz(func(t *testing.T, key1, key2, itemKey, itemPath, name string, perObject bool) {
		const value = "\x01VALUE\x02"
		if strings.Contains(key1+key2+itemKey+itemPath+name, "VALUE") {
			t.Skip()
		}
		l := Layout{PerObject: perObject, ConfigMapMode: 0o644, SecretMode: 0o600, Items: map[string]string{itemKey: itemPath}, Isolate: len(name)%2 == 0}
		objects := []source.Object{cm("ns", name, key1, value), secret("ns", name+"-s", key2, value)}
		objects[0].Annotations = map[string]string{"folder": itemPath} // a folder annotation as anyone writes it
		l.FolderAnnotation, l.Root, l.UniqueFilenames = "folder", "/root", len(key2)%2 == 1
		files, left, err := l.Files(objects)
		if err != nil {
			assert.NotContains(t, err.Error(), "VALUE")
			return
		}
		for _, lo := range left {
			assert.NotContains(t, lo.Why, "VALUE")
		}
		for p, f := range files {
			require.NoError(t, unpack.ValidatePath(p), "accepted path %q", p)
			assert.Equal(t, value, string(f.Data))
			for d := path.Dir(p); d != "."; d = path.Dir(d) {
				_, clash := files[d]
				assert.False(t, clash, "%q is a file and a folder of %q", d, p)
			}
		}
	})
}
