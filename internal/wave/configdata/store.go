// Package configdata keeps the whole data of the ConfigMaps and Secrets that opted-in workloads
// use, as the informers receive them, packed so that they share no room with the list
// responses they came in (pack.go). Everything else stays digests only.
//
//	s := configdata.New(); s.Wanted = controller.used; digester.Whole = s.Offer
//	obj, ok := s.Get(ref, resourceVersion)
package configdata

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/kube/configref"
)

// Store keeps the whole data of the ConfigMaps and Secrets that opted-in workloads use,
// as the informers receive them, so that Wave's hash of a change needs no read from the API:
// the hot path is the watch event and one PATCH. Every other object stays digests only, so
// memory does not grow with config that no workload uses. An object a workload starts to use
// is kept from its next change on (until then, the one read that adopts the workload gets it).
type Store struct {
	// Wanted reports whether an opted-in workload uses ref; set before the informers start.
	Wanted func(configref.Ref) bool

	mu   sync.RWMutex
	objs map[configref.Ref]metav1.Object // data and resourceVersion only
}

func New() *Store {
	return &Store{objs: map[configref.Ref]metav1.Object{}}
}

// Offer is the Digester's Whole hook: it keeps the data of an object that a workload uses, and
// drops any it kept of one that none uses any more.
func (w *Store) Offer(kind configref.Kind, o metav1.Object) {
	ref := configref.Ref{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName()}
	if w.Wanted == nil || !w.Wanted(ref) {
		w.Forget(ref)
		return
	}
	kept := packObject(o)
	if kept == nil {
		return
	}
	w.mu.Lock()
	w.objs[ref] = kept
	w.mu.Unlock()
}

// Repack copies every kept object again: called once the initial lists are in, it gathers
// them away from the heap the lists left (see pack.go and packall.go).
func (w *Store) Repack() {
	w.mu.Lock()
	defer w.mu.Unlock()
	refs := make([]configref.Ref, 0, len(w.objs))
	objs := make([]metav1.Object, 0, len(w.objs))
	for ref, o := range w.objs {
		refs = append(refs, ref)
		objs = append(objs, o)
	}
	packed := packAll(objs)
	kept := make(map[configref.Ref]metav1.Object, len(refs))
	for i, ref := range refs {
		o := packed[i]
		if o == nil { // not a ConfigMap or Secret: never kept, as packObject keeps none
			continue
		}
		ref.Namespace, ref.Name = o.GetNamespace(), o.GetName() // the packed copies
		kept[ref] = o
	}
	w.objs = kept
}

// Get returns the whole object at resourceVersion rv, if it is kept.
func (w *Store) Get(ref configref.Ref, rv string) (any, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	o, ok := w.objs[ref]
	if !ok || o.GetResourceVersion() != rv {
		return nil, false
	}
	return o, true
}

// Forget drops what is kept of ref.
func (w *Store) Forget(ref configref.Ref) {
	w.mu.Lock()
	delete(w.objs, ref)
	w.mu.Unlock()
}

// Len is how many objects are kept whole.
func (w *Store) Len() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return len(w.objs)
}
