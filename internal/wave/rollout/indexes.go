package rollout

import (
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/workload"
)

// The workload informers' index functions. client-go calls each of them on the old and on the
// new object of every update, six calls per event, and each needs the workload decoded from
// its cache entry (workload.Cached) or read from the object: the three values are worked out
// together, from one decode, and kept for the last few entries (indexMemo).

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
	memo := isPointer(obj)
	if memo {
		if v, ok := c.indexMemo.get(obj); ok {
			return v
		}
	}
	v := c.indexValues(obj)
	if memo {
		c.indexMemo.put(obj, v)
	}
	return v
}

// isPointer: an object the memo can know by identity. The informers hold pointers, to a
// workload.Cached or to a kind kept whole (a CronJob, an Argo Rollout).
func isPointer(obj any) bool {
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && !v.IsNil()
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
	used := podrefs.Extract(w.Meta.Namespace, w.Meta.Annotations, &w.Template.Spec)
	if !c.AllowCrossNamespaceRefs {
		used.DropOtherNamespaces(w.Meta.Namespace)
	}
	c.addSecretProviderClasses(used, w.Meta.Namespace, &w.Template.Spec, sel)
	all := sets.New(used.All()...)
	if sel.stakater != nil { // names in Reloader's reload lists, used by the pods or not
		for _, kind := range c.Informers.configKinds() {
			for _, re := range sel.stakater.NamesOf(kind) {
				if name, ok := podrefs.Literal(re); ok {
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
// never changed once made (an update makes a new one; client-go's informers hand out objects
// that nobody may change), and holding it here keeps its address from being reused meanwhile. Four covers an update's old and new object with room for an
// informer of another kind updating at the same time.
type indexMemo struct {
	mu    sync.Mutex
	next  int
	slots [4]struct {
		entry any
		v     indexValues
	}
}

func (m *indexMemo) get(entry any) (indexValues, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.slots {
		if s.entry == entry {
			return s.v, true
		}
	}
	return indexValues{}, false
}

func (m *indexMemo) put(entry any, v indexValues) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.slots[m.next].entry, m.slots[m.next].v = entry, v
	m.next = (m.next + 1) % len(m.slots)
}
