package workload

import (
	"context"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/wave/compactindex"
	"github.com/configwave/configwave/internal/wave/informer"
	"github.com/configwave/configwave/internal/wave/pollwatch"
	"github.com/configwave/configwave/internal/wave/waveclient"
)

// typed is a Type for a built-in kind with a typed client: a kind's file gives only what
// differs, where its informer, client, metadata and pod template are.
type typed[T, L runtime.Object] struct {
	kind     Kind
	resource schema.GroupResource
	client   func(c waveclient.Interface, namespace string) waveclient.Resource[T, L]
	view     func(T) (*metav1.ObjectMeta, *corev1.PodTemplateSpec)
	selector func(T) *metav1.LabelSelector
	progress func(T) Progress
	items    func(L) (objs []T, continueToken string)
	// reduced is a new object of the kind with only o's metadata, selector and pod template:
	// with the template slim, what the informers keep of it (Cached). nil for a kind they keep
	// whole.
	reduced func(o T) T
	// fresh is an empty object of the kind, for a Cached one to decode into.
	fresh func() T
}

func (t typed[T, L]) Kind() Kind { return t.kind }

func (t typed[T, L]) Informer(c Clients, namespace string, tweak func(*metav1.ListOptions), resync time.Duration) informer.Informer {
	return informer.NewPlain[L](t.client(c.Kube, namespace), c.Kube, t.example(), cacheOptions(tweak, resync, Trim))
}

// cacheOptions are those of every workload informer. They are plain informers, whose handlers
// only queue: a shared informer's buffers would keep the size of the initial list's backlog.
// Their stores are compact (compactindex): wave indexes every workload by each object it
// uses, which in client-go's store costs a set per object used.
func cacheOptions(tweak func(*metav1.ListOptions), resync time.Duration, transform cache.TransformFunc) informer.Options {
	return informer.Options{Tweak: tweak, Resync: resync, Transform: transform,
		Store: compactindex.New(cache.DeletionHandlingMetaNamespaceKeyFunc, informer.NamespaceIndex())}
}

// example is a new empty T: an informer needs only its type.
func (t typed[T, L]) example() T {
	var example T
	return reflect.New(reflect.TypeOf(example).Elem()).Interface().(T)
}

func (t typed[T, L]) GroupResource() schema.GroupResource { return t.resource }

func (t typed[T, L]) PolledInformer(c Clients, namespace string, tweak func(*metav1.ListOptions), poker *pollwatch.Poker, resync time.Duration) informer.Informer {
	list := listFunc(func(o metav1.ListOptions) (runtime.Object, error) {
		tweak(&o)
		l, err := t.client(c.Kube, namespace).List(context.Background(), o)
		if err != nil {
			return nil, err
		}
		return any(l).(runtime.Object), nil
	})
	return informer.PlainOf(pollwatch.Wrap(list, poker, pollwatch.Interval), t.example(), cacheOptions(nil, resync, Trim))
}

// listFunc is a list as a function.
type listFunc func(metav1.ListOptions) (runtime.Object, error)

func (f listFunc) List(o metav1.ListOptions) (runtime.Object, error) { return f(o) }

func (t typed[T, L]) Of(obj any) (Workload, bool) {
	if c, ok := obj.(*Cached); ok {
		if c.Kind != t.kind {
			return Workload{}, false
		}
		o := t.fresh()
		if err := c.decodeInto(o); err != nil {
			// wave encoded it itself, so this is a bug: the workload is left alone rather
			// than rolled on a guess.
			klog.ErrorS(err, "Workload not reconciled: wave cannot read back its own cache entry; please report this as a bug")
			return Workload{}, false
		}
		meta, tmpl := t.view(o)
		return Workload{Kind: t.kind, Object: o, Meta: meta, Template: tmpl, Selector: t.selector(o), Progress: c.Progress}, true
	}
	o, ok := obj.(T)
	if !ok {
		return Workload{}, false
	}
	meta, tmpl := t.view(o)
	return Workload{Kind: t.kind, Object: o, Meta: meta, Template: tmpl, Selector: t.selector(o), Progress: t.progress(o)}, true
}

func (t typed[T, L]) compact(obj any) (any, bool) {
	o, ok := obj.(T)
	if !ok {
		return nil, false
	}
	if t.reduced == nil {
		return obj, true
	}
	meta, template := t.view(o)
	slimTemplate(template)
	c, err := encode(t.kind, t.reduced(o), meta.Namespace, meta.Name, meta.ResourceVersion, t.progress(o))
	if err != nil {
		// Never seen. The cache then keeps the object as decoded, its template slim, and
		// wave works as it did before Cached, with more memory.
		klog.ErrorS(err, "Workload cached whole")
		return obj, true
	}
	return c, true
}

func (t typed[T, L]) Get(ctx context.Context, c Clients, namespace, name string) (Workload, error) {
	o, err := t.client(c.Kube, namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Workload{}, err
	}
	w, _ := t.Of(o)
	return w, nil
}

func (t typed[T, L]) List(ctx context.Context, c Clients, namespace string, opts metav1.ListOptions) ([]Workload, string, error) {
	l, err := t.client(c.Kube, namespace).List(ctx, opts)
	if err != nil {
		return nil, "", err
	}
	objs, next := t.items(l)
	ws := make([]Workload, len(objs))
	for i, o := range objs {
		ws[i], _ = t.Of(o)
	}
	return ws, next, nil
}

func (t typed[T, L]) Patch(ctx context.Context, c Clients, namespace, name string, body []byte) error {
	_, err := t.client(c.Kube, namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager})
	return err
}

// Restart: the kind's controller rolls the pods when the template changes.
func (t typed[T, L]) Restart(context.Context, Clients, Workload, string) error { return nil }

// pointers returns pointers to a list's items, as the informers hold them.
func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
