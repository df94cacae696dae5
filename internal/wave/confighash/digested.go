package confighash

import (
	"encoding/hex"
	"maps"
	"sort"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configwave/configwave/internal/wave/slimcache"
)

// Digested is what wave's informers keep of a ConfigMap or Secret: who it is, its
// resourceVersion, the metadata that decides what rolls, and a 128-bit digest per key.
//
// It is its own small type rather than a reduced corev1.ConfigMap because at 100,000 objects
// the per-object overhead is the memory: an empty ObjectMeta alone is about 260 bytes and a
// map of one key about 300, where this is about 130 bytes in all for an object of one key.
// The namespace, and key names seen before, are shared between objects.
type Digested struct {
	slimcache.Identity
	Keys []KeyDigest // sorted by Key
	// meta is nil for most objects: at 100,000 objects two map fields cost 1.6 MB more.
	meta *digestedMeta
}

// digestedMeta is the metadata a Digested keeps beside who it is.
type digestedMeta struct {
	labels      map[string]string // only with Digester.KeepLabels
	annotations map[string]string // only the keptAnnotations the object has
	incomplete  string            // sourceready.Incomplete: a half-written TLS pair, say
}

// KeyDigest is one key's digest.
type KeyDigest struct {
	Key    string
	Digest [16]byte
}

// Digests returns key → hex digest, the form the inputs record is made of.
func (d *Digested) Digests() map[string]string {
	out := make(map[string]string, len(d.Keys))
	for _, k := range d.Keys {
		out[k.Key] = hex.EncodeToString(k.Digest[:])
	}
	return out
}

// SameKeys reports whether two digested objects have the same keys and digests.
func (d *Digested) SameKeys(o *Digested) bool {
	if len(d.Keys) != len(o.Keys) {
		return false
	}
	for i := range d.Keys {
		if d.Keys[i] != o.Keys[i] {
			return false
		}
	}
	return true
}

func sortKeys(keys []KeyDigest) {
	sort.Slice(keys, func(i, j int) bool { return keys[i].Key < keys[j].Key })
}

// GetObjectKind is empty: the kind is the informer's.
func (d *Digested) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the maps and keys; the strings are immutable.
func (d *Digested) DeepCopyObject() runtime.Object {
	out := *d
	if d.meta != nil {
		out.meta = &digestedMeta{labels: maps.Clone(d.meta.labels), annotations: maps.Clone(d.meta.annotations), incomplete: d.meta.incomplete}
	}
	out.Keys = append([]KeyDigest(nil), d.Keys...)
	return &out
}

// interned shares the strings that many objects repeat: namespaces and key names. It is
// bounded so that objects with ever-new key names cannot grow it without end; past the bound
// a string is simply not shared.
var interned = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

const maxInterned = 1 << 14

func intern(s string) string {
	interned.Lock()
	defer interned.Unlock()
	if v, ok := interned.m[s]; ok {
		return v
	}
	if len(interned.m) < maxInterned {
		interned.m[s] = s
	}
	return s
}

var (
	_ runtime.Object = (*Digested)(nil)
	_ metav1.Object  = (*Digested)(nil)
)
