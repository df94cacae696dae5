// Package source watches named or label-selected ConfigMaps and Secrets and hands out complete,
// consistent snapshots of their keys.
//
//	w := source.New(coreV1Client, []source.Ref{{Kind: source.ConfigMap, Namespace: "web", Name: "nginx"}}, nil, source.Options{})
//	go w.Run(ctx)
//	<-w.Changed(); snap := w.Snapshot()
//
// Each named object has its own informer whose list and watch carry the field selector
// metadata.name=NAME, so the RBAC it needs can be limited with resourceNames. The informers'
// reflectors reconnect after a dropped watch and relist after 410 Gone; a consumer that takes
// a Snapshot after every Changed signal therefore never misses the latest state, whatever
// events were merged or replayed on the way.
package source

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/configwave/configwave/internal/coreclient"
)

// Kind is the kind of a config object.
type Kind string

const (
	ConfigMap Kind = "ConfigMap"
	Secret    Kind = "Secret"
)

func (k Kind) resource() string {
	if k == Secret {
		return "secrets"
	}
	return "configmaps"
}

// Ref names one ConfigMap or Secret.
type Ref struct {
	Kind      Kind
	Namespace string
	Name      string
}

// String is how the object is named in logs and errors: "configmap web/nginx".
func (r Ref) String() string {
	return fmt.Sprintf("%s %s/%s", lowerKind(r.Kind), r.Namespace, r.Name)
}

func lowerKind(k Kind) string {
	if k == Secret {
		return "secret"
	}
	return "configmap"
}

// Selector selects every object of the given kinds whose labels match, in one namespace or,
// when Namespace is empty, in all of them.
type Selector struct {
	Kinds     []Kind
	Namespace string
	Labels    labels.Selector
}

// Object is one ConfigMap or Secret as the app sees it: every key of data and binaryData
// (ConfigMap) or data (Secret), byte-exact. The API server rejects a ConfigMap whose data and
// binaryData share a key, so merging them loses nothing.
type Object struct {
	Ref
	Data map[string][]byte
}

// Snapshot is the current state of every source.
type Snapshot struct {
	Objects []Object // sorted by kind, namespace, name
	Missing []Ref    // named objects that do not exist (yet)
}

// Options tunes a Watcher.
type Options struct {
	// OnWatchRestart is called whenever a source's watch is opened again after the first one:
	// after a dropped connection, a 410 Gone relist, an API server restart, or the server's
	// routine watch timeout.
	OnWatchRestart func(source string)
}

// Watcher keeps one informer per named object and per selected kind.
type Watcher struct {
	refs      []Ref
	informers []cache.SharedIndexInformer
	selected  []cache.SharedIndexInformer // subset of informers fed by a Selector
	named     map[Ref]cache.SharedIndexInformer
	changed   chan struct{}
	opts      Options
}

// New prepares informers for the named objects and the selector (which may be nil). client is
// a REST client for core/v1 (coreclient.New, or a clientset's CoreV1().RESTClient()). Nothing
// talks to the API server before Run.
func New(client cache.Getter, refs []Ref, sel *Selector, opts Options) *Watcher {
	w := &Watcher{
		refs:    refs,
		named:   map[Ref]cache.SharedIndexInformer{},
		changed: make(chan struct{}, 1),
		opts:    opts,
	}
	for _, r := range refs {
		if _, dup := w.named[r]; dup {
			continue
		}
		name := r.Name
		lw := cache.NewFilteredListWatchFromClient(client, r.Kind.resource(), r.Namespace, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
		inf := w.newInformer(w.counted(lw, r.String()), r.Kind)
		w.named[r] = inf
	}
	if sel != nil {
		for _, k := range sel.Kinds {
			labelSel := sel.Labels.String()
			lw := cache.NewFilteredListWatchFromClient(client, k.resource(), sel.Namespace, func(o *metav1.ListOptions) {
				o.LabelSelector = labelSel
			})
			ns := sel.Namespace
			if ns == "" {
				ns = "all namespaces"
			}
			desc := fmt.Sprintf("%ss matching %q in %s", lowerKind(k), labelSel, ns)
			w.selected = append(w.selected, w.newInformer(w.counted(lw, desc), k))
		}
	}
	return w
}

// counted reports every watch of lw after the first to OnWatchRestart.
func (w *Watcher) counted(lw *cache.ListWatch, desc string) *cache.ListWatch {
	if w.opts.OnWatchRestart == nil {
		return lw
	}
	var watches atomic.Int64
	next := lw.WatchFuncWithContext
	// Only the context variants are set, so that both Watch and WatchWithContext go through
	// the count.
	return &cache.ListWatch{
		ListWithContextFunc: lw.ListWithContextFunc,
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if watches.Add(1) > 1 {
				w.opts.OnWatchRestart(desc)
			}
			return next(ctx, o)
		},
	}
}

func (w *Watcher) newInformer(lw cache.ListerWatcher, k Kind) cache.SharedIndexInformer {
	var example runtime.Object = &coreclient.ConfigMap{}
	if k == Secret {
		example = &coreclient.Secret{}
	}
	inf := cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{})
	// Only the fact that something changed matters; Snapshot reads the stores.
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.notify() },
		UpdateFunc: func(any, any) { w.notify() },
		DeleteFunc: func(any) { w.notify() },
	})
	w.informers = append(w.informers, inf)
	return inf
}

func (w *Watcher) notify() {
	select {
	case w.changed <- struct{}{}:
	default: // a signal is already pending; the consumer will read the newest state anyway
	}
}

// Changed receives a value after any source changed. Signals are merged: one value may stand
// for many changes.
func (w *Watcher) Changed() <-chan struct{} { return w.changed }

// Run runs the informers until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, inf := range w.informers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inf.RunWithContext(ctx)
		}()
	}
	wg.Wait()
}

// WaitForSync blocks until every informer has listed once, or ctx ends (then it returns false).
func (w *Watcher) WaitForSync(ctx context.Context) bool {
	synced := make([]cache.InformerSynced, 0, len(w.informers))
	for _, inf := range w.informers {
		synced = append(synced, inf.HasSynced)
	}
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}

// Snapshot returns the current content of every source from the informers' caches.
func (w *Watcher) Snapshot() Snapshot {
	var s Snapshot
	seen := map[Ref]bool{}
	add := func(obj any) {
		o, ok := toObject(obj)
		if ok && !seen[o.Ref] {
			seen[o.Ref] = true
			s.Objects = append(s.Objects, o)
		}
	}
	for _, r := range w.refs {
		inf := w.named[r]
		obj, exists, _ := inf.GetStore().GetByKey(r.Namespace + "/" + r.Name)
		if !exists {
			if !seen[r] {
				s.Missing = append(s.Missing, r)
				seen[r] = true
			}
			continue
		}
		add(obj)
	}
	for _, inf := range w.selected {
		for _, obj := range inf.GetStore().List() {
			add(obj)
		}
	}
	sort.Slice(s.Objects, func(i, j int) bool { return less(s.Objects[i].Ref, s.Objects[j].Ref) })
	return s
}

func less(a, b Ref) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

func toObject(obj any) (Object, bool) {
	switch o := obj.(type) {
	case *coreclient.ConfigMap:
		data := make(map[string][]byte, len(o.Data)+len(o.BinaryData))
		for k, v := range o.Data {
			data[k] = []byte(v)
		}
		for k, v := range o.BinaryData {
			data[k] = v
		}
		return Object{Ref: Ref{Kind: ConfigMap, Namespace: o.Namespace, Name: o.Name}, Data: data}, true
	case *coreclient.Secret:
		data := make(map[string][]byte, len(o.Data))
		for k, v := range o.Data {
			data[k] = v
		}
		return Object{Ref: Ref{Kind: Secret, Namespace: o.Namespace, Name: o.Name}, Data: data}, true
	}
	return Object{}, false
}
