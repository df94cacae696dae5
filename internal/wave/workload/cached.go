package workload

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configwave/configwave/internal/wave/slimcache"
)

// Cached is what the informers keep of a Deployment, StatefulSet or DaemonSet: who it is, its
// Progress as its status gave it when it arrived, and the object of its kind reduced to its
// metadata, selector and slim pod template (slimTemplate), protobuf-encoded. Of decodes it
// when read.
//
// It is its own type rather than a slim apps/v1 object because with 10,000 workloads the
// decoded objects are most of wave's heap: the apps/v1 struct alone is 1.2 KB, and its maps
// (annotations, selector, template annotations) about 300 bytes each. A Deployment as the
// benchmark makes it takes about 4 KB slim and decoded, about 0.8 KB this way. wave reads a
// workload once per reconcile and per index, and decoding its few hundred bytes takes 5 to
// 10 µs.
type Cached struct {
	// Identity is all of metav1.Object that reads as set here; Of gives the whole metadata.
	slimcache.Identity
	Kind     Kind
	Progress Progress
	encoded  []byte
}

// Compact returns what the informers keep of obj: a *Cached for a Deployment, StatefulSet or
// DaemonSet, anything else as it is (a CronJob's template becomes its Job's, so it is kept
// whole). wave writes workloads only with patches of its own fields, never by sending a cached
// object back, so nothing the cache lacks is lost.
func Compact(obj any) any {
	for _, t := range kinds {
		if c, ok := t.(compacter); ok {
			if out, ok := c.compact(obj); ok {
				return out
			}
		}
	}
	return obj
}

type compacter interface {
	// compact returns what the cache keeps of obj, and false when obj is of another kind.
	compact(obj any) (any, bool)
}

// The generated protobuf code of every built-in kind has these.
type (
	marshaler   interface{ Marshal() ([]byte, error) }
	unmarshaler interface{ Unmarshal([]byte) error }
)

// encode makes the Cached of reduced, an object of kind.
func encode(kind Kind, reduced runtime.Object, namespace, name, resourceVersion string, p Progress) (*Cached, error) {
	m, ok := reduced.(marshaler)
	if !ok {
		return nil, fmt.Errorf("%s %s/%s: the kind has no protobuf encoding", kind, namespace, name)
	}
	b, err := m.Marshal()
	if err != nil {
		return nil, fmt.Errorf("encode %s %s/%s for the cache: %w", kind, namespace, name, err)
	}
	return &Cached{Identity: slimcache.Identity{Namespace: namespace, Name: name, ResourceVersion: resourceVersion}, Kind: kind, Progress: p, encoded: b}, nil
}

// decodeInto decodes the cached object into empty, an object of its kind.
func (c *Cached) decodeInto(empty runtime.Object) error {
	u, ok := empty.(unmarshaler)
	if !ok {
		return fmt.Errorf("%s %s/%s: the kind has no protobuf encoding", c.Kind, c.Namespace, c.Name)
	}
	if err := u.Unmarshal(c.encoded); err != nil {
		return fmt.Errorf("decode the cached %s %s/%s: %w", c.Kind, c.Namespace, c.Name, err)
	}
	return nil
}

// GetObjectKind is empty, as of the objects the informers decode: the kind is the informer's.
func (c *Cached) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the struct; the encoded object is never written, so it is shared.
func (c *Cached) DeepCopyObject() runtime.Object {
	out := *c
	return &out
}

// Pack replaces every *Cached in objs with an equal copy; the copies' structs lie in one
// array, their encoded objects in another and their strings in one string. It is for the
// informers' stores once they synced (compactindex.Indexer.Repack): made while the initial
// list was decoded, each entry holds pages of the heap the list left behind.
func Pack(objs []any) {
	n, size := 0, 0
	var b slimcache.StringPacker
	for _, obj := range objs {
		if c, ok := obj.(*Cached); ok {
			n++
			size += len(c.encoded)
			b.Add(c.Namespace)
			b.Add(c.Name)
			b.Add(c.ResourceVersion)
		}
	}
	strs := b.Strings()
	structs := make([]Cached, 0, n) // exact: the pointers into it never move
	encoded := make([]byte, 0, size)
	for i, obj := range objs {
		c, ok := obj.(*Cached)
		if !ok {
			continue
		}
		out := *c
		out.Namespace, out.Name, out.ResourceVersion, strs = strs[0], strs[1], strs[2], strs[3:]
		start := len(encoded)
		encoded = append(encoded, c.encoded...)
		out.encoded = encoded[start:len(encoded):len(encoded)]
		structs = append(structs, out)
		objs[i] = &structs[len(structs)-1]
	}
}
