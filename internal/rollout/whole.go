package rollout

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/refs"
)

// wholeObjects keeps the whole data of the ConfigMaps and Secrets that opted-in workloads use,
// as the informers receive them, so that Wave's hash of a change needs no read from the API:
// the hot path is the watch event and one PATCH. Every other object stays digests only, so
// memory does not grow with config that no workload uses. An object a workload starts to use
// is kept from its next change on (until then, the one read that adopts the workload gets it).
type wholeObjects struct {
	// wanted reports whether an opted-in workload uses ref; set before the informers start.
	wanted func(refs.ObjectRef) bool

	mu   sync.RWMutex
	objs map[refs.ObjectRef]metav1.Object // data and resourceVersion only
}

func newWholeObjects() *wholeObjects {
	return &wholeObjects{objs: map[refs.ObjectRef]metav1.Object{}}
}

// offer is the Digester's Whole hook: it keeps the data of an object that a workload uses, and
// drops any it kept of one that none uses any more.
func (w *wholeObjects) offer(kind refs.ConfigKind, o metav1.Object) {
	ref := refs.ObjectRef{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName()}
	if w.wanted == nil || !w.wanted(ref) {
		w.forget(ref)
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

// repack copies every kept object again: called once the initial lists are in, it gathers
// them away from the heap the lists left (see pack.go).
func (w *wholeObjects) repack() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ref, o := range w.objs {
		w.objs[ref] = packObject(o)
	}
}

// get returns the whole object at resourceVersion rv, if it is kept.
func (w *wholeObjects) get(ref refs.ObjectRef, rv string) (any, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	o, ok := w.objs[ref]
	if !ok || o.GetResourceVersion() != rv {
		return nil, false
	}
	return o, true
}

func (w *wholeObjects) forget(ref refs.ObjectRef) {
	w.mu.Lock()
	delete(w.objs, ref)
	w.mu.Unlock()
}

// len is how many objects are kept whole.
func (w *wholeObjects) len() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return len(w.objs)
}
