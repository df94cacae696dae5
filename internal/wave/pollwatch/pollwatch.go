// Package pollwatch serves an informer's watch by listing, for a resource its client may list
// but not watch: Stakater Reloader's chart grants list, get, update and patch on Deployments,
// DaemonSets and StatefulSets and list, get on CronJobs, with no watch, since Reloader lists
// its workloads on each change. The informer stays an informer (cache, indexers, handlers);
// only its watch is emulated: a list at once, on every Poke (a config change, which may
// concern the workloads) and every interval, with what changed since the last list sent as
// events.
//
//	poker := pollwatch.NewPoker()
//	lw := pollwatch.Wrap(cache.NewFilteredListWatchFromClient(rc, "deployments", ns, tweak), poker, time.Minute)
//	informer := cache.NewSharedIndexInformer(lw, &appsv1.Deployment{}, resync, indexers)
//	poker.Poke() // on every ConfigMap or Secret event
package pollwatch

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Poker wakes every emulated watch at once.
type Poker struct {
	mu      sync.Mutex
	waiters map[chan struct{}]struct{}
}

func NewPoker() *Poker { return &Poker{waiters: map[chan struct{}]struct{}{}} }

// Poke makes every emulated watch list again soon; pokes while a list runs merge into one more.
func (p *Poker) Poke() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ch := range p.waiters {
		select {
		case ch <- struct{}{}:
		default: // a list is already due
		}
	}
}

func (p *Poker) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	p.mu.Lock()
	p.waiters[ch] = struct{}{}
	p.mu.Unlock()
	return ch, func() {
		p.mu.Lock()
		delete(p.waiters, ch)
		p.mu.Unlock()
	}
}

// lister is what Wrap needs of the wrapped ListerWatcher: its list.
type lister interface {
	List(options metav1.ListOptions) (runtime.Object, error)
}

// ListWatch lists through the wrapped lister, and emulates its watch.
type ListWatch struct {
	lw       lister
	poker    *Poker
	interval time.Duration

	mu   sync.Mutex
	last snapshot // what the latest List returned, the base of the next watch
}

// snapshot is one list: each object by UID, and the list's resource version.
type snapshot struct {
	version string
	objects map[types.UID]runtime.Object
}

// Wrap returns a ListerWatcher that lists with lw and emulates its watch.
func Wrap(lw lister, poker *Poker, interval time.Duration) *ListWatch {
	return &ListWatch{lw: lw, poker: poker, interval: interval}
}

// IsWatchListSemanticsUnSupported tells client-go's reflector to list, not to stream the
// initial list through a watch (which needs watch rights).
func (l *ListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// List lists whole (no pages: the emulated watch diffs against a complete list) and keeps the
// result as the base of the next watch.
func (l *ListWatch) List(options metav1.ListOptions) (runtime.Object, error) {
	options.Limit, options.Continue = 0, ""
	obj, err := l.lw.List(options)
	if err != nil {
		return nil, err
	}
	s, err := snapshotOf(obj)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.last = s
	l.mu.Unlock()
	return obj, nil
}

func snapshotOf(list runtime.Object) (snapshot, error) {
	items, err := meta.ExtractList(list)
	if err != nil {
		return snapshot{}, err
	}
	s := snapshot{objects: make(map[types.UID]runtime.Object, len(items))}
	if la, err := meta.ListAccessor(list); err == nil {
		s.version = la.GetResourceVersion()
	}
	for _, o := range items {
		if a, err := meta.Accessor(o); err == nil {
			s.objects[a.GetUID()] = o
		}
	}
	return s, nil
}

// Watch starts an emulated watch from the latest list: it lists again at once, then on every
// poke and every interval, and sends what changed.
func (l *ListWatch) Watch(options metav1.ListOptions) (watch.Interface, error) {
	l.mu.Lock()
	base := l.last
	l.mu.Unlock()
	if base.version != options.ResourceVersion {
		base = snapshot{} // not the list this watch follows: whatever is listed is news
	}
	options.Limit, options.Continue, options.ResourceVersion, options.Watch = 0, "", "", false
	options.AllowWatchBookmarks, options.TimeoutSeconds, options.SendInitialEvents = false, nil, nil
	ctx, cancel := context.WithCancel(context.Background())
	w := &polledWatch{events: make(chan watch.Event), cancel: cancel}
	poked, unsubscribe := l.poker.subscribe()
	go func() {
		defer close(w.events)
		defer unsubscribe()
		tick := time.NewTicker(l.interval)
		defer tick.Stop()
		prev := base
		for wait := false; ; wait = true {
			if wait {
				select {
				case <-ctx.Done():
					return
				case <-poked:
				case <-tick.C:
				}
			}
			obj, err := l.lw.List(options)
			if err != nil {
				klog.V(2).InfoS("listing in place of a watch failed; listing again at the next change", "err", err.Error())
				continue
			}
			cur, err := snapshotOf(obj)
			if err != nil {
				klog.ErrorS(err, "a list in place of a watch could not be read")
				continue
			}
			for _, e := range diff(prev, cur) {
				select {
				case w.events <- e:
				case <-ctx.Done():
					return
				}
			}
			prev = cur
			l.mu.Lock()
			l.last = cur
			l.mu.Unlock()
		}
	}()
	return w, nil
}

// diff is the watch events that turn list prev into list cur: an object new by its UID is
// added, one whose resource version moved is modified, one gone is deleted (as it was last).
func diff(prev, cur snapshot) []watch.Event {
	var out []watch.Event
	for uid, o := range cur.objects {
		old, ok := prev.objects[uid]
		switch {
		case !ok:
			out = append(out, watch.Event{Type: watch.Added, Object: o})
		case version(old) != version(o):
			out = append(out, watch.Event{Type: watch.Modified, Object: o})
		}
	}
	for uid, o := range prev.objects {
		if _, ok := cur.objects[uid]; !ok {
			out = append(out, watch.Event{Type: watch.Deleted, Object: o})
		}
	}
	return out
}

func version(o runtime.Object) string {
	if a, err := meta.Accessor(o); err == nil {
		return a.GetResourceVersion()
	}
	return ""
}

type polledWatch struct {
	events chan watch.Event
	cancel context.CancelFunc
}

func (w *polledWatch) Stop()                          { w.cancel() }
func (w *polledWatch) ResultChan() <-chan watch.Event { return w.events }

var _ cache.ListerWatcher = (*ListWatch)(nil)

// Interval is how often an emulated watch lists without a poke: the bound on how late a
// workload created or changed without any config change is seen.
const Interval = time.Minute
