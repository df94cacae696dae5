package informer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// Informer is what wave's caches need of an informer: a SharedIndexInformer is one, and so is
// a Plain.
type Informer interface {
	GetIndexer() cache.Indexer
	HasSynced() bool
	AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	RunWithContext(ctx context.Context)
}

// Plain is an informer whose handlers run in its own loop, one after the other, once the
// store holds the change: client-go's plain informer (NewInformerWithOptions) with more than
// one handler, and a store of the caller's choosing. A shared informer hands every change to a goroutine per handler through a
// buffer that grows to the largest backlog and never shrinks: with 100,000 ConfigMaps and
// Secrets listed at start, 1.5-3 MB held for good. The handlers must be quick, as they hold
// up the informer while they run.
type Plain struct {
	indexer  cache.Indexer
	ctrl     cache.Controller
	handlers []cache.ResourceEventHandler
	started  atomic.Bool
}

var _ Informer = (*Plain)(nil)

// NewPlain is New's informer as a Plain. o.Indexers nil means none. With o.Store, the informer
// fills that store instead of client-go's (o.Indexers is then ignored: the store has its own).
//
// Its queue is client-go's in-order queue with atomic events, as client-go's own informers
// have it since 1.36: a list arrives as one change holding every object, not one change per
// object. The queue's slice keeps the size of its longest backlog until it next grows, so one
// change per object would hold 3.5 MB after listing 100,000 objects.
func NewPlain[L runtime.Object](c ListerWatcher[L], client any, example runtime.Object, o Options) *Plain {
	return PlainOf(cache.ToListWatcherWithWatchListSemantics(listWatch(c, o.Tweak), client), example, o)
}

// PlainOf is NewPlain over any ListerWatcher (an emulated watch, listpoll); o.Tweak is not
// used: lw narrows its own lists.
func PlainOf(lw cache.ListerWatcher, example runtime.Object, o Options) *Plain {
	p := &Plain{indexer: o.Store}
	if p.indexer == nil {
		indexers := o.Indexers
		if indexers == nil {
			indexers = cache.Indexers{} // an Indexer, not a bare Store, for GetIndexer
		}
		p.indexer = cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers)
	}
	fifo := cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
		KeyFunction:           cache.MetaNamespaceKeyFunc,
		Transformer:           o.Transform,
		AtomicEvents:          true,
		EmitDeltaTypeBookmark: true,
	})
	p.ctrl = cache.New(&cache.Config{
		Queue:            fifo,
		ListerWatcher:    lw,
		ObjectType:       example,
		FullResyncPeriod: o.Resync,
		Process:          p.process,
	})
	return p
}

// process applies changes to the store and then hands each to the handlers, as client-go's
// informers do.
func (p *Plain) process(obj any, isInInitialList bool) error {
	deltas, ok := obj.(cache.Deltas)
	if !ok {
		return fmt.Errorf("informer: the queue handed over %T, not deltas", obj)
	}
	for _, d := range deltas {
		switch d.Type {
		case cache.Sync, cache.Replaced, cache.Added, cache.Updated:
			if err := p.apply(d.Object, isInInitialList); err != nil {
				return err
			}
		case cache.Deleted:
			if err := p.indexer.Delete(d.Object); err != nil {
				return err
			}
			fanOut{p}.OnDelete(d.Object)
		case cache.ReplacedAll:
			info, ok := d.Object.(cache.ReplacedAllInfo)
			if !ok {
				return fmt.Errorf("informer: a list of type %T", d.Object)
			}
			if err := p.replace(info, isInInitialList); err != nil {
				return err
			}
		case cache.SyncAll:
			for _, obj := range p.indexer.List() {
				fanOut{p}.OnUpdate(obj, obj)
			}
		case cache.Bookmark:
			if info, ok := d.Object.(cache.BookmarkInfo); ok {
				p.indexer.Bookmark(info.ResourceVersion)
			}
		default:
			return fmt.Errorf("informer: a change of unknown type %q", d.Type)
		}
	}
	return nil
}

func (p *Plain) apply(obj any, isInInitialList bool) error {
	if old, exists, err := p.indexer.Get(obj); err == nil && exists {
		if err := p.indexer.Update(obj); err != nil {
			return err
		}
		fanOut{p}.OnUpdate(old, obj)
		return nil
	}
	if err := p.indexer.Add(obj); err != nil {
		return err
	}
	fanOut{p}.OnAdd(obj, isInInitialList)
	return nil
}

// replace makes the store hold a new list, as client-go's informers do: the store first, then
// a delete for each object the list no longer has (its last state unknown), then an update or
// add for each listed object, in the list's order.
func (p *Plain) replace(info cache.ReplacedAllInfo, isInInitialList bool) error {
	var olds []any
	var gone []cache.DeletedFinalStateUnknown
	if known := p.indexer.ListKeys(); len(known) > 0 { // none at the first list
		olds = make([]any, len(info.Objects))
		listed := make(map[string]struct{}, len(info.Objects))
		for i, obj := range info.Objects {
			key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			if err != nil {
				return err
			}
			listed[key] = struct{}{}
			if old, exists, err := p.indexer.Get(obj); err == nil && exists {
				olds[i] = old
			}
		}
		for _, key := range known {
			if _, ok := listed[key]; ok {
				continue
			}
			if old, exists, err := p.indexer.GetByKey(key); err == nil && exists {
				gone = append(gone, cache.DeletedFinalStateUnknown{Key: key, Obj: old})
			}
		}
	}
	if err := p.indexer.Replace(info.Objects, info.ResourceVersion); err != nil {
		return err
	}
	for _, obj := range gone {
		fanOut{p}.OnDelete(obj)
	}
	for i, obj := range info.Objects {
		if olds != nil && olds[i] != nil {
			fanOut{p}.OnUpdate(olds[i], obj)
		} else {
			fanOut{p}.OnAdd(obj, isInInitialList)
		}
	}
	return nil
}

// errStarted: a handler added once the informer runs would miss what it already handed on.
var errStarted = errors.New("a plain informer takes its handlers before it starts")

// AddEventHandler adds h; only before RunWithContext. The registration is nil: HasSynced
// tells when every handler has seen the initial list.
func (p *Plain) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	if p.started.Load() {
		return nil, errStarted
	}
	p.handlers = append(p.handlers, h)
	return nil, nil
}

func (p *Plain) GetIndexer() cache.Indexer { return p.indexer }

// HasSynced: the initial list is in the store and every handler has seen it, as they run
// before the next item is taken.
func (p *Plain) HasSynced() bool { return p.ctrl.HasSynced() }

func (p *Plain) RunWithContext(ctx context.Context) {
	p.started.Store(true)
	p.ctrl.RunWithContext(ctx)
}

// fanOut calls every handler in turn. The handlers slice is only appended to before the
// informer starts, so its loop reads it without a lock.
type fanOut struct{ p *Plain }

func (f fanOut) OnAdd(obj any, isInInitialList bool) {
	for _, h := range f.p.handlers {
		h.OnAdd(obj, isInInitialList)
	}
}

func (f fanOut) OnUpdate(old, obj any) {
	for _, h := range f.p.handlers {
		h.OnUpdate(old, obj)
	}
}

func (f fanOut) OnDelete(obj any) {
	for _, h := range f.p.handlers {
		h.OnDelete(obj)
	}
}
