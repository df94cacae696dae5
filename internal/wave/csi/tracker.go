package csi

import (
	"sync"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/configref"
)

// byClass indexes statuses by their SecretProviderClass: "NAMESPACE/CLASS".
const byClass = "class"

// Indexers are the indexers a PodStatus informer needs for a Tracker.
func Indexers() cache.Indexers {
	return cache.Indexers{byClass: func(obj any) ([]string, error) {
		if s, ok := obj.(*Status); ok && s.Class != "" {
			return []string{s.Namespace + "/" + s.Class}, nil
		}
		return nil, nil
	}}
}

// Tracker holds, per SecretProviderClass, the versions its pods run now. Reloader rolls when a
// status's versions change, never when a pod comes or goes (a new pod mounts what the provider
// has then): so the current hash of a class is the one its latest changed status reports, and
// only an update of a status moves it. Before any update, the statuses decide by majority.
type Tracker struct {
	mu       sync.Mutex
	latest   map[configref.Ref]string
	stores   []cache.Indexer
	onChange func(configref.Ref)
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{latest: map[configref.Ref]string{}, onChange: func(configref.Ref) {}}
}

// OnChange sets what is called with a class whose hash may have moved, or whose first or last
// status came or went. Call it before the informers start.
func (t *Tracker) OnChange(f func(configref.Ref)) { t.onChange = f }

// Watch reads statuses from an informer (transformed by Transform, indexed by Indexers).
// Call it before the informer starts.
func (t *Tracker) Watch(inf cache.SharedIndexInformer) error {
	t.stores = append(t.stores, inf.GetIndexer())
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.added(obj) },
		UpdateFunc: func(old, obj any) { t.updated(old, obj) },
		DeleteFunc: func(obj any) { t.deleted(obj) },
	})
	return err
}

func (t *Tracker) added(obj any) {
	s, ok := obj.(*Status)
	if ok && s.UnreadableField != "" {
		logUnreadable(s)
	}
	if ok && s.Class != "" {
		t.onChange(s.Ref()) // a new pod moves nothing, but a first one makes the class present
	}
}

func (t *Tracker) updated(old, obj any) {
	o, ok1 := old.(*Status)
	n, ok2 := obj.(*Status)
	if !ok1 || !ok2 {
		return
	}
	switch {
	case n.UnreadableField != "" && o.UnreadableField == "":
		logUnreadable(n)
		t.deleted(o) // as if its pod went: it reports nothing wave can read
		return
	case o.UnreadableField != "" && n.UnreadableField == "":
		t.added(n) // as if its pod came
		return
	case n.Class == "":
		return
	}
	if o.Hash != n.Hash || o.Class != n.Class {
		t.mu.Lock()
		t.latest[n.Ref()] = n.Hash
		t.mu.Unlock()
		t.onChange(n.Ref())
	}
	if o.Class != n.Class && o.Class != "" {
		t.onChange(o.Ref())
	}
}

func (t *Tracker) deleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	s, ok := obj.(*Status)
	if !ok || s.Class == "" {
		return
	}
	if len(t.hashes(s.Ref())) == 0 {
		t.mu.Lock()
		delete(t.latest, s.Ref()) // no pod left: the next one to come decides again
		t.mu.Unlock()
	}
	t.onChange(s.Ref())
}

func (t *Tracker) hashes(ref configref.Ref) []string {
	var out []string
	for _, st := range t.stores {
		objs, _ := st.ByIndex(byClass, ref.Namespace+"/"+ref.Name)
		for _, obj := range objs {
			out = append(out, obj.(*Status).Hash)
		}
	}
	return out
}

// Current is the hash of the versions a class's pods run now, and whether any pod reports on
// it. The majority a first look finds is kept, so that later pods, coming or going, move it no
// more than they move Reloader.
func (t *Tracker) Current(ref configref.Ref) (string, bool) {
	hashes := t.hashes(ref)
	t.mu.Lock()
	defer t.mu.Unlock()
	if h, ok := t.latest[ref]; ok {
		return h, true
	}
	if len(hashes) == 0 {
		return "", false
	}
	h := Majority(hashes)
	t.latest[ref] = h
	return h, true
}

// logUnreadable says, when a status becomes so, which of its fields wave could not read: never
// the field's value.
func logUnreadable(s *Status) {
	klog.InfoS("a SecretProviderClassPodStatus has a field wave cannot read: it is left out, as if its pod reported nothing (is the driver's CRD the one wave knows?)",
		"object", klog.KRef(s.Namespace, s.Name), "field", s.UnreadableField)
}
