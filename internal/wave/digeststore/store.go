// Package digeststore is the cache of wave's ConfigMap and Secret informers: the digested
// objects (confighash.Digested) kept as compact records, about 91 bytes each after Repack
// where client-go's store of the same objects costs about 212 (BenchmarkBytesPerObject).
//
// At 100,000 objects that per-object cost is the largest part of wave's heap. client-go's
// store keeps a "namespace/name" key string beside each object, a map entry of a string and
// an interface, and the object itself (its namespace, name and resourceVersion strings, a
// slice of key digests, a pointer for the rare metadata). Here the namespace is the outer
// map's key, the name the inner map's key, the resourceVersion a number, and an object of
// one key holds it inline; Repack then moves every record and name into two blocks, away
// from the heap the initial list fragmented.
package digeststore

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"k8s.io/client-go/tools/cache"

	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/slimcache"
)

// record is what the store keeps of one object, beside its namespace and name (the maps'
// keys).
type record struct {
	rv    uint64               // the resourceVersion plus one when it is a plain number; else 0
	first confighash.KeyDigest // the only key, unless rest.keys says otherwise
	rest  *rest                // nil for most objects
}

// rest is what few objects need: a key count other than one, labels, kept annotations, or a
// resourceVersion that is not a plain number (the API calls it opaque).
type rest struct {
	keys        []confighash.KeyDigest // every key when non-nil (possibly none); nil: first alone
	labels      map[string]string
	annotations map[string]string
	rv          string
	incomplete  string // confighash.Digested.Incomplete: a half-written TLS pair, say
}

func pack(d *confighash.Digested) record {
	var r record
	var x rest
	if len(d.Keys) == 1 {
		r.first = d.Keys[0]
	} else {
		x.keys = append(make([]confighash.KeyDigest, 0, len(d.Keys)), d.Keys...)
	}
	x.labels, x.annotations, x.incomplete = d.GetLabels(), d.GetAnnotations(), d.Incomplete()
	if v, err := strconv.ParseUint(d.ResourceVersion, 10, 64); err == nil && v < math.MaxUint64 && strconv.FormatUint(v, 10) == d.ResourceVersion {
		r.rv = v + 1
	} else {
		x.rv = d.ResourceVersion
	}
	if x.keys != nil || x.labels != nil || x.annotations != nil || x.rv != "" || x.incomplete != "" {
		r.rest = &x
	}
	return r
}

// unpack builds the object anew: what a caller changes of it never reaches the store.
func (r *record) unpack(namespace, name string) *confighash.Digested {
	d := &confighash.Digested{Identity: slimcache.Identity{Namespace: namespace, Name: name}}
	if r.rest == nil || r.rest.keys == nil {
		d.Keys = []confighash.KeyDigest{r.first}
	} else {
		d.Keys = append(make([]confighash.KeyDigest, 0, len(r.rest.keys)), r.rest.keys...)
	}
	switch {
	case r.rv > 0:
		d.ResourceVersion = strconv.FormatUint(r.rv-1, 10)
	case r.rest != nil:
		d.ResourceVersion = r.rest.rv
	}
	if r.rest != nil {
		if r.rest.labels != nil {
			d.SetLabels(r.rest.labels)
		}
		if r.rest.annotations != nil {
			d.SetAnnotations(r.rest.annotations)
		}
		d.SetIncomplete(r.rest.incomplete)
	}
	return d
}

// Store is a cache.Indexer of *confighash.Digested, keyed as client-go keys namespaced objects
// ("namespace/name"), with the namespace index (cache.NamespaceIndex) and no other. What it
// returns is built anew on every read. Anything but a *Digested (or a tombstone of one) is
// refused with an error.
type Store struct {
	mu   sync.RWMutex
	byNS map[string]map[string]*record
	n    int
}

// New is an empty Store.
func New() *Store { return &Store{byNS: map[string]map[string]*record{}} }

var _ cache.Indexer = (*Store)(nil)

func digested(obj any) (*confighash.Digested, error) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	d, ok := obj.(*confighash.Digested)
	if !ok {
		return nil, fmt.Errorf("digest store: %T is not a digested ConfigMap or Secret (the informer's transform must be confighash's)", obj)
	}
	return d, nil
}

func (s *Store) put(d *confighash.Digested) {
	names := s.byNS[d.Namespace]
	if names == nil {
		names = map[string]*record{}
		s.byNS[d.Namespace] = names
	}
	r := pack(d)
	if old, ok := names[d.Name]; ok {
		*old = r // the name string the map holds stays; the record is reused
		return
	}
	names[d.Name] = &r
	s.n++
}

// Add keeps obj, a *confighash.Digested, replacing what the store had of it.
func (s *Store) Add(obj any) error {
	d, err := digested(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.put(d)
	return nil
}

// Update is Add.
func (s *Store) Update(obj any) error { return s.Add(obj) }

// Delete forgets obj (a *confighash.Digested or a tombstone of one); nothing when it is absent.
func (s *Store) Delete(obj any) error {
	d, err := digested(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(d.Namespace, d.Name)
	return nil
}

func (s *Store) remove(namespace, name string) {
	names := s.byNS[namespace]
	if _, ok := names[name]; !ok {
		return
	}
	delete(names, name)
	s.n--
	if len(names) == 0 {
		delete(s.byNS, namespace)
	}
}

// Get returns the stored object with obj's namespace and name.
func (s *Store) Get(obj any) (any, bool, error) {
	d, err := digested(obj)
	if err != nil {
		return nil, false, err
	}
	return s.get(d.Namespace, d.Name)
}

// GetByKey returns the object of key, "namespace/name".
func (s *Store) GetByKey(key string) (any, bool, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false, err
	}
	return s.get(ns, name)
}

func (s *Store) get(namespace, name string) (any, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.byNS[namespace][name]
	if !ok {
		return nil, false, nil
	}
	return r.unpack(namespace, name), true, nil
}

// List returns every object.
func (s *Store) List() []any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]any, 0, s.n)
	for ns, names := range s.byNS {
		for name, r := range names {
			out = append(out, r.unpack(ns, name))
		}
	}
	return out
}

// ListKeys returns every object's key.
func (s *Store) ListKeys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, s.n)
	for ns := range s.byNS {
		out = s.appendKeys(out, ns)
	}
	return out
}

func (s *Store) appendKeys(out []string, namespace string) []string {
	for name := range s.byNS[namespace] {
		out = append(out, namespace+"/"+name)
	}
	return out
}

// Replace makes the store hold list and nothing else.
func (s *Store) Replace(list []any, _ string) error {
	objs := make([]*confighash.Digested, 0, len(list))
	for _, obj := range list {
		d, err := digested(obj)
		if err != nil {
			return err
		}
		objs = append(objs, d)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byNS, s.n = map[string]map[string]*record{}, 0
	for _, d := range objs {
		s.put(d)
	}
	return nil
}

// Repack moves every record into one block and every name into one string, with maps of
// exactly their size. Call it once the initial list is in: the records it leaves were
// allocated among the list's decoded objects, whose garbage leaves them scattered over
// memory that cannot be handed back while one of them lives. Records added later are
// allocated as usual; one replaced after Repack is overwritten in place.
func (s *Store) Repack() {
	s.mu.Lock()
	defer s.mu.Unlock()
	slab := make([]record, 0, s.n) // exact: the pointers into it never move
	byNS := make(map[string]map[string]*record, len(s.byNS))
	for ns, names := range s.byNS {
		order := make([]string, 0, len(names))
		size := 0
		for name, r := range names {
			order = append(order, name)
			size += len(name)
			slab = append(slab, *r)
		}
		var b strings.Builder
		b.Grow(size)
		for _, name := range order {
			b.WriteString(name)
		}
		block, base, off := b.String(), len(slab)-len(order), 0
		packed := make(map[string]*record, len(order))
		for i, name := range order {
			packed[block[off:off+len(name)]] = &slab[base+i]
			off += len(name)
		}
		byNS[ns] = packed
	}
	s.byNS = byNS
}

// Resync does nothing: there is nothing to resync with.
func (s *Store) Resync() error { return nil }

// LastStoreSyncResourceVersion is unknown, as client-go's store has it without atomic events
// (the informer's queue hands this store one object at a time).
func (s *Store) LastStoreSyncResourceVersion() string { return "" }

// Bookmark is ignored, as above.
func (s *Store) Bookmark(string) {}

// Len is the number of objects kept.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.n
}

// Names lists the names of the objects kept in namespace.
func (s *Store) Names(namespace string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.byNS[namespace]))
	for name := range s.byNS[namespace] {
		out = append(out, name)
	}
	return out
}

func indexErr(name string) error {
	return fmt.Errorf("digest store: no index %q; it keeps only %q", name, cache.NamespaceIndex)
}

// Index returns the objects in obj's namespace.
func (s *Store) Index(indexName string, obj any) ([]any, error) {
	d, err := digested(obj)
	if err != nil {
		return nil, err
	}
	return s.ByIndex(indexName, d.Namespace)
}

// IndexKeys returns the keys of the objects in namespace.
func (s *Store) IndexKeys(indexName, namespace string) ([]string, error) {
	if indexName != cache.NamespaceIndex {
		return nil, indexErr(indexName)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.appendKeys(make([]string, 0, len(s.byNS[namespace])), namespace), nil
}

// ListIndexFuncValues returns the namespaces that hold objects.
func (s *Store) ListIndexFuncValues(indexName string) []string {
	if indexName != cache.NamespaceIndex {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.byNS))
	for ns := range s.byNS {
		out = append(out, ns)
	}
	return out
}

// ByIndex returns the objects in namespace.
func (s *Store) ByIndex(indexName, namespace string) ([]any, error) {
	if indexName != cache.NamespaceIndex {
		return nil, indexErr(indexName)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]any, 0, len(s.byNS[namespace]))
	for name, r := range s.byNS[namespace] {
		out = append(out, r.unpack(namespace, name))
	}
	return out, nil
}

// GetIndexers is the namespace index.
func (s *Store) GetIndexers() cache.Indexers {
	return cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
}

// AddIndexers refuses any index: the store keeps its namespace index and no other.
func (s *Store) AddIndexers(newIndexers cache.Indexers) error {
	for name := range newIndexers {
		if name != cache.NamespaceIndex {
			return indexErr(name)
		}
	}
	return nil
}
