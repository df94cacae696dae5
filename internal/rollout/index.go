package rollout

import (
	"sync"

	"github.com/configwave/configwave/internal/refs"
)

// Index is the reverse index ConfigMap/Secret → workloads that use it, rebuilt from the
// informers as workloads are synced. It replaces Wave's owner references on config objects:
// nothing is written to the cluster to know who uses what. Names that do not exist yet are
// indexed too, so their creation finds the workloads waiting for them.
type Index struct {
	mu         sync.RWMutex
	byConfig   map[refs.ObjectRef]map[string]struct{}
	byWorkload map[string][]refs.ObjectRef
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{byConfig: map[refs.ObjectRef]map[string]struct{}{}, byWorkload: map[string][]refs.ObjectRef{}}
}

// Set records that workload uses exactly refs.
func (i *Index) Set(workload string, refs []refs.ObjectRef) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.removeLocked(workload)
	if len(refs) == 0 {
		return
	}
	i.byWorkload[workload] = refs
	for _, r := range refs {
		ws := i.byConfig[r]
		if ws == nil {
			ws = map[string]struct{}{}
			i.byConfig[r] = ws
		}
		ws[workload] = struct{}{}
	}
}

// Delete forgets a workload.
func (i *Index) Delete(workload string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.removeLocked(workload)
}

func (i *Index) removeLocked(workload string) {
	for _, r := range i.byWorkload[workload] {
		if ws := i.byConfig[r]; ws != nil {
			delete(ws, workload)
			if len(ws) == 0 {
				delete(i.byConfig, r)
			}
		}
	}
	delete(i.byWorkload, workload)
}

// Users returns the workloads that use ref.
func (i *Index) Users(ref refs.ObjectRef) []string {
	i.mu.RLock()
	defer i.mu.RUnlock()
	out := make([]string, 0, len(i.byConfig[ref]))
	for w := range i.byConfig[ref] {
		out = append(out, w)
	}
	return out
}

// Workloads is how many workloads are tracked.
func (i *Index) Workloads() int {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return len(i.byWorkload)
}

// Configs is how many config objects are indexed.
func (i *Index) Configs() int {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return len(i.byConfig)
}
