// Package informer makes one informer over any client that lists and watches one resource, as
// client-go's generated informers do, without their factory: the factory needs the generated
// clientset, whose scheme registers every API group (about 10 MiB of resident pages in wave).
package informer

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ListerWatcher is the part of a typed client (or a dynamic one's ResourceInterface) an
// informer uses.
type ListerWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Options are what the factories took as options.
type Options struct {
	// Tweak narrows every list and watch (a label selector); nil for none.
	Tweak  func(*metav1.ListOptions)
	Resync time.Duration
	// Indexers: nil for none, not even the namespace index the factories add.
	Indexers cache.Indexers
	// Transform reduces each object before the cache keeps it; nil keeps it as decoded.
	Transform cache.TransformFunc
	// Store, for NewPlain only, is the cache the informer fills; nil for client-go's.
	Store cache.Indexer
}

// New is an informer of the objects of example's type that c lists and watches. client is asked,
// as the factories ask the clientset, whether it can stream a list in a watch (a fake cannot).
func New[L runtime.Object](c ListerWatcher[L], client any, example runtime.Object, o Options) cache.SharedIndexInformer {
	lw := listWatch(c, o.Tweak)
	indexers := o.Indexers
	if indexers == nil {
		indexers = cache.Indexers{}
	}
	inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), example,
		cache.SharedIndexInformerOptions{ResyncPeriod: o.Resync, Indexers: indexers})
	if o.Transform != nil {
		// A new informer has not started, the one case SetTransform refuses.
		_ = inf.SetTransform(o.Transform)
	}
	return inf
}

func listWatch[L runtime.Object](c ListerWatcher[L], tweak func(*metav1.ListOptions)) *cache.ListWatch {
	narrow := func(opts *metav1.ListOptions) {
		if tweak != nil {
			tweak(opts)
		}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			narrow(&opts)
			return c.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			narrow(&opts)
			return c.Watch(ctx, opts)
		},
	}
}

// NamespaceIndex is the index the factories' informers have.
func NamespaceIndex() cache.Indexers {
	return cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
}
