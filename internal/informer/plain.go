package informer

import (
	"context"
	"errors"
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
// one handler. A shared informer hands every change to a goroutine per handler through a
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

// NewPlain is New's informer as a Plain. o.Indexers nil means none.
func NewPlain[L runtime.Object](c ListerWatcher[L], client any, example runtime.Object, o Options) *Plain {
	p := &Plain{}
	indexers := o.Indexers
	if indexers == nil {
		indexers = cache.Indexers{} // an Indexer, not a bare Store, for GetIndexer
	}
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(listWatch(c, o.Tweak), client),
		ObjectType:    example,
		Handler:       fanOut{p},
		ResyncPeriod:  o.Resync,
		Indexers:      indexers,
		Transform:     o.Transform,
	})
	p.indexer, p.ctrl = store.(cache.Indexer), ctrl
	return p
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
