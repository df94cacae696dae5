// Package compactindex is a cache.Indexer that behaves as client-go's (cache.NewIndexer) and
// keeps its indexes in fewer bytes: the cache of wave's workload informers.
//
// client-go keeps the keys under each index value in a set of their own, a map of about 190
// bytes even for one key. wave's reverse index (a workload under each ConfigMap and Secret it
// uses) has one value per object a workload uses, most of them used by one or two workloads:
// with 10,000 Deployments using two objects each, client-go's indexes took 4.1 MB of wave's
// heap. Here the keys under a value are a slice while they are few and a set beyond that,
// and Repack copies every entry, once the caches synced, away from the heap the initial lists
// fragmented. Indexed as wave indexes them, a workload
// costs about 294 bytes here and 469 in client-go's store (BenchmarkBytesPerWorkload).
//
// One difference: an index function that fails makes Add, Update or Replace return its error
// (naming the object's key and the index) where client-go's store panics. The object is then
// stored and indexed under the values the other index functions gave.
package compactindex

import (
	"fmt"
	"slices"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"

	"github.com/configwave/configwave/internal/wave/slimcache"
)

// fewest is how many keys one index value keeps in a slice; a set beyond that. A key is
// found by comparing it with each, so the slice stays short.
const fewest = 8

// keys are the keys of the objects under one index value.
type keys struct {
	few  []string            // while there are fewest or less; nil once many is used
	many map[string]struct{} // beyond that
}

func (k *keys) len() int {
	if k.many != nil {
		return len(k.many)
	}
	return len(k.few)
}

func (k *keys) has(key string) bool {
	if k.many != nil {
		_, ok := k.many[key]
		return ok
	}
	return slices.Contains(k.few, key)
}

func (k *keys) add(key string) {
	if k.has(key) {
		return
	}
	if k.many != nil {
		k.many[key] = struct{}{}
		return
	}
	if len(k.few) < fewest {
		k.few = append(k.few, key)
		return
	}
	k.many = make(map[string]struct{}, 2*fewest)
	for _, f := range k.few {
		k.many[f] = struct{}{}
	}
	k.many[key] = struct{}{}
	k.few = nil
}

// remove drops key. The slice's array may be shared with other values' slices after Repack,
// each its own part of it (their capacity ends where it ends), so removing writes only within
// this one's part.
func (k *keys) remove(key string) {
	if k.many != nil {
		delete(k.many, key)
		return
	}
	if i := slices.Index(k.few, key); i >= 0 {
		last := len(k.few) - 1
		k.few[i] = k.few[last]
		k.few[last] = "" // no longer held
		k.few = k.few[:last]
	}
}

func (k *keys) appendTo(out []string) []string {
	if k.many != nil {
		for key := range k.many {
			out = append(out, key)
		}
		return out
	}
	return append(out, k.few...)
}

// index is one index: its values, each with its keys.
type index map[string]keys

func (ix index) add(value, key string) {
	k := ix[value]
	k.add(key)
	ix[value] = k
}

func (ix index) remove(value, key string) {
	k, ok := ix[value]
	if !ok {
		return
	}
	k.remove(key)
	if k.len() == 0 {
		delete(ix, value) // as client-go does: values of short-lived objects would pile up
		return
	}
	ix[value] = k
}

// Indexer is the cache.Indexer; safe for concurrent use. The objects are shared with every
// caller, as client-go's are: nobody may change one.
type Indexer struct {
	mu       sync.RWMutex
	keyFunc  cache.KeyFunc
	items    map[string]any
	indexers cache.Indexers
	indices  map[string]index
	rv       string // the last resourceVersion the store saw, for LastStoreSyncResourceVersion
}

var _ cache.Indexer = (*Indexer)(nil)

// New is an empty Indexer keyed by keyFunc (cache.DeletionHandlingMetaNamespaceKeyFunc for an
// informer's) with indexers.
func New(keyFunc cache.KeyFunc, indexers cache.Indexers) *Indexer {
	s := &Indexer{keyFunc: keyFunc, items: map[string]any{}, indexers: cache.Indexers{}, indices: map[string]index{}}
	for name, f := range indexers {
		s.indexers[name] = f
		s.indices[name] = index{}
	}
	return s
}

func (s *Indexer) key(obj any) (string, error) {
	key, err := s.keyFunc(obj)
	if err != nil {
		return "", cache.KeyError{Obj: obj, Err: err}
	}
	return key, nil
}

// resourceVersionOf is obj's resourceVersion, and false for an object without metadata (a
// tombstone).
func resourceVersionOf(obj any) (string, bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", false
	}
	return m.GetResourceVersion(), true
}

// Add stores obj, replacing what the store had under its key.
func (s *Indexer) Add(obj any) error {
	key, err := s.key(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.items[key]
	s.items[key] = obj
	if rv, ok := resourceVersionOf(obj); ok {
		s.rv = rv
	}
	return s.reindex(key, old, obj)
}

// Update is Add.
func (s *Indexer) Update(obj any) error { return s.Add(obj) }

// Delete forgets the object under obj's key; nothing when there is none.
func (s *Indexer) Delete(obj any) error {
	key, err := s.key(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.items[key]
	if !ok {
		return nil
	}
	if rv, ok := resourceVersionOf(obj); ok {
		s.rv = rv
	}
	delete(s.items, key)
	return s.reindex(key, old, nil)
}

// reindex moves key from the values old had to those obj has (either nil for none). Every
// index is updated even when one fails; the first error is returned.
func (s *Indexer) reindex(key string, old, obj any) error {
	var first error
	for name, f := range s.indexers {
		if err := s.reindexOne(name, f, key, old, obj); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (s *Indexer) reindexOne(name string, f cache.IndexFunc, key string, old, obj any) error {
	var before, after []string
	var err error
	if old != nil {
		// A failure here was the same failure when old was stored: it was indexed under
		// nothing, so there is nothing to take back.
		before, _ = f(old)
	}
	if obj != nil {
		if after, err = f(obj); err != nil {
			after = nil
			err = fmt.Errorf("index %q of %q: %w", name, key, err)
		}
	}
	if len(before) == 1 && len(after) == 1 && before[0] == after[0] {
		return err // the common update: the value did not change
	}
	ix := s.indices[name]
	for _, v := range before {
		ix.remove(v, key)
	}
	for _, v := range after {
		ix.add(v, key)
	}
	return err
}

// List returns every object, in no order.
func (s *Indexer) List() []any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]any, 0, len(s.items))
	for _, obj := range s.items {
		out = append(out, obj)
	}
	return out
}

// ListKeys returns every object's key, in no order.
func (s *Indexer) ListKeys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.items))
	for key := range s.items {
		out = append(out, key)
	}
	return out
}

// Get returns the object stored under obj's key.
func (s *Indexer) Get(obj any) (any, bool, error) {
	key, err := s.key(obj)
	if err != nil {
		return nil, false, err
	}
	return s.GetByKey(key)
}

// GetByKey returns the object stored under key.
func (s *Indexer) GetByKey(key string) (any, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	obj, ok := s.items[key]
	return obj, ok, nil
}

// Replace makes the store hold list and nothing else, and rebuilds the indexes.
func (s *Indexer) Replace(list []any, resourceVersion string) error {
	items := make(map[string]any, len(list))
	for _, obj := range list {
		key, err := s.key(obj)
		if err != nil {
			return err
		}
		items[key] = obj
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items, s.rv = items, resourceVersion
	for name := range s.indices {
		s.indices[name] = index{}
	}
	var first error
	for key, obj := range items {
		if err := s.reindex(key, nil, obj); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Resync does nothing, as client-go's store.
func (s *Indexer) Resync() error { return nil }

// LastStoreSyncResourceVersion is the resourceVersion of the last change, list or bookmark.
func (s *Indexer) LastStoreSyncResourceVersion() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rv
}

// Bookmark notes a resourceVersion the informer reached without a change.
func (s *Indexer) Bookmark(rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv = rv
}

func (s *Indexer) indexNamed(name string) (index, cache.IndexFunc, error) {
	f, ok := s.indexers[name]
	if !ok {
		return nil, nil, fmt.Errorf("index %q does not exist: the store has %v", name, s.indexNames())
	}
	return s.indices[name], f, nil
}

func (s *Indexer) indexNames() []string {
	names := make([]string, 0, len(s.indexers))
	for name := range s.indexers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Index returns the objects that share a value of index indexName with obj.
func (s *Indexer) Index(indexName string, obj any) ([]any, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ix, f, err := s.indexNamed(indexName)
	if err != nil {
		return nil, err
	}
	values, err := f(obj)
	if err != nil {
		return nil, fmt.Errorf("index %q of the object asked about: %w", indexName, err)
	}
	var found []string
	for _, v := range values {
		if k, ok := ix[v]; ok {
			found = k.appendTo(found)
		}
	}
	if len(values) > 1 { // an object under two of the values is listed once
		slices.Sort(found)
		found = slices.Compact(found)
	}
	return s.objects(found), nil
}

// IndexKeys returns the keys of the objects under value in index indexName.
func (s *Indexer) IndexKeys(indexName, value string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.keysUnder(indexName, value)
}

// keysUnder is IndexKeys with the lock held.
func (s *Indexer) keysUnder(indexName, value string) ([]string, error) {
	ix, _, err := s.indexNamed(indexName)
	if err != nil {
		return nil, err
	}
	k := ix[value]
	return k.appendTo(make([]string, 0, k.len())), nil
}

// ListIndexFuncValues returns the values index indexName has objects under; none for an index
// that does not exist, as client-go's store.
func (s *Indexer) ListIndexFuncValues(indexName string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ix := s.indices[indexName]
	out := make([]string, 0, len(ix))
	for v := range ix {
		out = append(out, v)
	}
	return out
}

// ByIndex returns the objects under value in index indexName.
func (s *Indexer) ByIndex(indexName, value string) ([]any, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	keys, err := s.keysUnder(indexName, value)
	if err != nil {
		return nil, err
	}
	return s.objects(keys), nil
}

func (s *Indexer) objects(keys []string) []any {
	out := make([]any, 0, len(keys))
	for _, key := range keys {
		out = append(out, s.items[key])
	}
	return out
}

// GetIndexers returns the index functions.
func (s *Indexer) GetIndexers() cache.Indexers {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(cache.Indexers, len(s.indexers))
	for name, f := range s.indexers {
		out[name] = f
	}
	return out
}

// AddIndexers adds index functions and indexes what the store holds already; a name taken
// is refused, as client-go's store refuses it.
func (s *Indexer) AddIndexers(more cache.Indexers) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range more {
		if _, ok := s.indexers[name]; ok {
			return fmt.Errorf("index %q exists already: the store has %v", name, s.indexNames())
		}
	}
	var first error
	for name, f := range more {
		s.indexers[name] = f
		s.indices[name] = index{}
		for key, obj := range s.items {
			if err := s.reindexOne(name, f, key, nil, obj); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// Len is the number of objects stored.
func (s *Indexer) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.items)
}

// Repack rebuilds the store away from the heap the initial lists left: the maps at their
// size, every key and index value copied into one string, the keys of the values with few
// into one array (each value's slice its own part of it), and, with pack, the objects too:
// pack replaces objs[i] with a copy it made, equal to it. Call it once the informer synced:
// what the list left is then garbage as a whole, not live entries spread over its pages.
func (s *Indexer) Repack(pack func(objs []any)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.items))
	objs := make([]any, 0, len(s.items))
	var b slimcache.StringPacker
	for key, obj := range s.items {
		keys = append(keys, key)
		objs = append(objs, obj)
		b.Add(key)
	}
	if pack != nil {
		pack(objs)
	}
	copies := b.Strings()
	items := make(map[string]any, len(keys))
	copyOf := make(map[string]string, len(keys)) // only while repacking
	for i, key := range keys {
		items[copies[i]] = objs[i]
		copyOf[key] = copies[i]
	}
	s.items = items
	for name, ix := range s.indices {
		s.indices[name] = ix.repack(copyOf)
	}
}

// repack is ix rebuilt with the keys copyOf gives for the old ones.
func (ix index) repack(copyOf map[string]string) index {
	values := make([]string, 0, len(ix))
	var b slimcache.StringPacker
	n := 0
	for v, k := range ix {
		values = append(values, v)
		b.Add(v)
		n += len(k.few)
	}
	valueCopies := b.Strings()
	block := make([]string, 0, n)
	packed := make(index, len(ix))
	for i, v := range values {
		k := ix[v]
		if k.many != nil {
			many := make(map[string]struct{}, len(k.many))
			for key := range k.many {
				many[copyOf[key]] = struct{}{}
			}
			k.many = many
		} else {
			start := len(block)
			for _, key := range k.few {
				block = append(block, copyOf[key])
			}
			k.few = block[start:len(block):len(block)]
		}
		packed[valueCopies[i]] = k
	}
	return packed
}
