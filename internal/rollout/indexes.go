package rollout

import (
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/configwave/configwave/internal/configref"
	"github.com/configwave/configwave/internal/refs"
	"github.com/configwave/configwave/internal/workload"
)

// The workload informers' index functions. client-go calls each of them on the old and on the
// new object of every update, six calls per event, and each needs the workload decoded from
// its cache entry (workload.Cached): the three values are worked out together, from one
// decode, and kept for the last few entries (indexMemo).

func (c *Controller) configKeys(obj any) ([]string, error) { return c.indexValuesOf(obj).config, nil }

func (c *Controller) optInKey(obj any) ([]string, error) { return c.indexValuesOf(obj).optIn, nil }

func (c *Controller) patternKey(obj any) ([]string, error) { return c.indexValuesOf(obj).pattern, nil }

// indexValues are one workload's values in the three indexes. Shared between callers: read
// only.
type indexValues struct {
	// config: what an opted-in workload's template uses, objects that do not exist yet
	// included, other namespaces only where they are allowed (byConfig).
	config []string
	// optIn: "true" for an opted-in workload (byOptIn).
	optIn []string
	// pattern: the namespace of a workload whose Reloader reload lists hold a regular
	// expression, which any object of the namespace may match (byPattern).
	pattern []string
}

func (c *Controller) indexValuesOf(obj any) indexValues {
	entry, cached := obj.(*workload.Cached)
	cached = cached && entry != nil
	if cached {
		if v, ok := c.indexMemo.get(entry); ok {
			return v
		}
	}
	v := c.indexValues(obj)
	if cached {
		c.indexMemo.put(entry, v)
	}
	return v
}

func (c *Controller) indexValues(obj any) indexValues {
	w, ok := workload.Of(obj)
	if !ok {
		return indexValues{}
	}
	sel := c.annotated(w)
	if !sel.optedIn() {
		return indexValues{}
	}
	v := indexValues{optIn: []string{"true"}}
	if sel.stakater != nil && sel.stakater.HasPatterns() {
		v.pattern = []string{w.Meta.Namespace}
	}
	used := refs.Extract(w.Meta.Namespace, w.Meta.Annotations, &w.Template.Spec)
	if !c.AllowCrossNamespaceRefs {
		used.DropOtherNamespaces(w.Meta.Namespace)
	}
	c.addSecretProviderClasses(used, w.Meta.Namespace, &w.Template.Spec, sel)
	all := sets.New(used.All()...)
	if sel.stakater != nil { // names in Reloader's reload lists, used by the pods or not
		for _, kind := range c.Informers.configKinds() {
			for _, re := range sel.stakater.NamesOf(kind) {
				if name, ok := refs.Literal(re); ok {
					all.Insert(configref.Ref{Kind: kind, Namespace: w.Meta.Namespace, Name: name})
				}
			}
		}
	}
	v.config = make([]string, 0, all.Len())
	for r := range all {
		v.config = append(v.config, r.String())
	}
	return v
}

// indexMemo holds the index values of the last few cache entries, by identity: an entry is
// never changed once made (an update makes a new one), and holding it here keeps its address
// from being reused meanwhile. Four covers an update's old and new object with room for an
// informer of another kind updating at the same time.
type indexMemo struct {
	mu    sync.Mutex
	next  int
	slots [4]struct {
		entry *workload.Cached
		v     indexValues
	}
}

func (m *indexMemo) get(entry *workload.Cached) (indexValues, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.slots {
		if s.entry == entry {
			return s.v, true
		}
	}
	return indexValues{}, false
}

func (m *indexMemo) put(entry *workload.Cached, v indexValues) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.slots[m.next].entry, m.slots[m.next].v = entry, v
	m.next = (m.next + 1) % len(m.slots)
}
