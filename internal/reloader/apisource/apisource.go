// Package apisource is the reloader's API source: named or label-selected ConfigMaps and Secrets
// read from the Kubernetes API, handed out as complete snapshots (source.Snapshot). It is the
// only part of the reloader's pipeline that links the API client, so that the file-only build
// (cmd/reloader with the configwave_fileonly tag) leaves it out.
//
//	w := apisource.New(coreV1Client, []configref.Ref{{Kind: configref.ConfigMap, Namespace: "web", Name: "nginx"}}, nil, apisource.Options{})
//	go w.Run(ctx)
//	<-w.Changed(); snap := w.Snapshot()
//
// A consumer that takes a Snapshot after every Changed signal never misses the latest state,
// whatever events were merged or replayed on the way: a signal only says "look again".
package apisource

// The API source. Each named object has its own informer whose list and watch carry the field
// selector metadata.name=NAME, so the RBAC it needs can be limited with resourceNames. The
// informers' reflectors reconnect after a dropped watch and relist after 410 Gone.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/reloader/coreclient"
	"github.com/configwave/configwave/internal/reloader/source"
)

// Options tunes an API source.
type Options struct {
	// OnWatchRestart is called whenever a source's watch is opened again after the first one:
	// after a dropped connection, a 410 Gone relist, an API server restart, or the server's
	// routine watch timeout. OnWatch is called when a source's first watch is opened, so that
	// a counter of restarts can exist at 0 before the first one.
	OnWatchRestart func(source string)
	OnWatch        func(source string)
	// Annotations are the annotations kept in each Object (a layout's folder annotation).
	Annotations []string
	// WatchIdleTimeout ends a watch from which no event and no bookmark came for this long,
	// so that a new one is opened (and counted); 0 never. OnWatchIdle is told when it does.
	WatchIdleTimeout time.Duration
	OnWatchIdle      func(source string)
}

// Source is the source of ConfigMaps and Secrets read from the Kubernetes API: one informer per
// named object and per selected kind.
type Source struct {
	refs      []configref.Ref
	informers []*informer
	selected  []*informer // subset of informers fed by a Selector
	named     map[configref.Ref]*informer
	changed   chan struct{}
	opts      Options
}

// New prepares informers for the named objects and the selector (which may be nil). client is
// a REST client for core/v1 (coreclient.New, or a clientset's CoreV1().RESTClient()). Nothing
// talks to the API server before Run.
func New(client cache.Getter, refs []configref.Ref, sel *source.Selector, opts Options) *Source {
	w := &Source{
		refs:    refs,
		named:   map[configref.Ref]*informer{},
		changed: make(chan struct{}, 1),
		opts:    opts,
	}
	for _, r := range refs {
		if _, dup := w.named[r]; dup {
			continue
		}
		name := r.Name
		lw := cache.NewFilteredListWatchFromClient(client, r.Kind.Resource(), r.Namespace, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
		inf := w.newInformer(w.counted(lw, r.String()), r.Kind)
		w.named[r] = inf
	}
	if sel != nil {
		namespaces := sel.Namespaces
		if len(namespaces) == 0 {
			namespaces = []string{metav1.NamespaceAll}
		}
		for _, ns := range namespaces {
			for _, k := range sel.Kinds {
				labelSel := sel.Labels
				lw := cache.NewFilteredListWatchFromClient(client, k.Resource(), ns, func(o *metav1.ListOptions) {
					o.LabelSelector = labelSel
				})
				where := ns
				if where == metav1.NamespaceAll {
					where = "all namespaces"
				}
				desc := fmt.Sprintf("%ss matching %q in %s", k.Lower(), labelSel, where)
				w.selected = append(w.selected, w.newInformer(w.counted(lw, desc), k))
			}
		}
	}
	return w
}

// counted reports every watch of lw after the first to OnWatchRestart, and ends a watch that
// stays silent for WatchIdleTimeout.
func (w *Source) counted(lw *cache.ListWatch, desc string) *cache.ListWatch {
	if w.opts.OnWatchRestart == nil && w.opts.OnWatch == nil && w.opts.WatchIdleTimeout <= 0 {
		return lw
	}
	var watches atomic.Int64
	next := lw.WatchFuncWithContext
	// Only the context variants are set, so that both Watch and WatchWithContext go through
	// the count.
	return &cache.ListWatch{
		ListWithContextFunc: lw.ListWithContextFunc,
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			switch first := watches.Add(1) == 1; {
			case first && w.opts.OnWatch != nil:
				w.opts.OnWatch(desc)
			case !first && w.opts.OnWatchRestart != nil:
				w.opts.OnWatchRestart(desc)
			}
			wi, err := next(ctx, o)
			if err != nil || w.opts.WatchIdleTimeout <= 0 {
				return wi, err
			}
			return newIdleWatch(wi, clock.RealClock{}, w.opts.WatchIdleTimeout, func() {
				if w.opts.OnWatchIdle != nil {
					w.opts.OnWatchIdle(desc)
				}
			}), nil
		},
	}
}

// informer is a store that a reflector keeps equal to the API, and the controller that runs it.
//
// It is client-go's plain informer, not a shared one: the source's one handler runs in line,
// as soon as the store holds the change. A shared informer hands every change to each handler
// through two goroutines and a buffer of its own, for handlers that come and go, which this
// source has not. From the store to the handler took 32 µs that way and 21 µs this way, in a
// sidecar woken from its sleep by a change.
type informer struct {
	store cache.Store
	ctrl  cache.Controller
}

func (w *Source) newInformer(lw cache.ListerWatcher, k configref.Kind) *informer {
	var example runtime.Object = &coreclient.ConfigMap{}
	if k == configref.Secret {
		example = &coreclient.Secret{}
	}
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    example,
		// Only the fact that something changed matters; Snapshot reads the stores.
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { w.notify() },
			UpdateFunc: func(any, any) { w.notify() },
			DeleteFunc: func(any) { w.notify() },
		},
	})
	inf := &informer{store: store, ctrl: ctrl}
	w.informers = append(w.informers, inf)
	return inf
}

func (w *Source) notify() {
	select {
	case w.changed <- struct{}{}:
	default: // a signal is already pending; the consumer will read the newest state anyway
	}
}

// Changed receives a value after any source changed. Signals are merged: one value may stand
// for many changes.
func (w *Source) Changed() <-chan struct{} { return w.changed }

// Run runs the informers until ctx ends.
func (w *Source) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, inf := range w.informers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inf.ctrl.RunWithContext(ctx)
		}()
	}
	wg.Wait()
}

// WaitForSync blocks until every informer has listed once, or ctx ends (then it returns false).
func (w *Source) WaitForSync(ctx context.Context) bool {
	synced := make([]cache.InformerSynced, 0, len(w.informers))
	for _, inf := range w.informers {
		synced = append(synced, inf.ctrl.HasSynced)
	}
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}

// Snapshot returns the current content of every source from the informers' caches.
func (w *Source) Snapshot() source.Snapshot {
	var s source.Snapshot
	seen := map[configref.Ref]bool{}
	add := func(obj any) {
		o, ok := toObject(obj, w.opts.Annotations)
		if ok && !seen[o.Ref] {
			seen[o.Ref] = true
			s.Objects = append(s.Objects, o)
		}
	}
	for _, r := range w.refs {
		inf := w.named[r]
		obj, exists, _ := inf.store.GetByKey(r.Namespace + "/" + r.Name)
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
		for _, obj := range inf.store.List() {
			add(obj)
		}
	}
	slices.SortFunc(s.Objects, func(a, b source.Object) int { return configref.Compare(a.Ref, b.Ref) })
	return s
}

func toObject(obj any, annotations []string) (source.Object, bool) {
	switch o := obj.(type) {
	case *coreclient.ConfigMap:
		data := make(map[string][]byte, len(o.Data)+len(o.BinaryData))
		for k, v := range o.Data {
			data[k] = []byte(v)
		}
		maps.Copy(data, o.BinaryData)
		return source.Object{Ref: configref.Ref{Kind: configref.ConfigMap, Namespace: o.Namespace, Name: o.Name}, Data: data, Annotations: kept(o.Annotations, annotations),
			Version: version(o.UID, o.ResourceVersion)}, true
	case *coreclient.Secret:
		data := make(map[string][]byte, len(o.Data))
		maps.Copy(data, o.Data)
		return source.Object{Ref: configref.Ref{Kind: configref.Secret, Namespace: o.Namespace, Name: o.Name}, Data: data, Annotations: kept(o.Annotations, annotations),
			Version: version(o.UID, o.ResourceVersion)}, true
	}
	return source.Object{}, false
}

// version names an object's exact content without its values: every sidecar that reads it
// sees the same (--rollout=one-first compares them).
func version(uid types.UID, resourceVersion string) string {
	return string(uid) + "/" + resourceVersion
}

func kept(all map[string]string, names []string) map[string]string {
	var out map[string]string
	for _, n := range names {
		if v, ok := all[n]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[n] = v
		}
	}
	return out
}
