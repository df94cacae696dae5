package rollout

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/workload"
)

// adoptRevision makes the index and snapshots of w's current revision live as long as the
// revision object its controller made for it (a ReplicaSet, a ControllerRevision), once per
// revision. The webhook does it at each new pod of the revision; a revision that never has
// one (0 replicas), or whose pods the webhook missed (wave down, the call failed), would
// otherwise keep its snapshots for ever, counted against the namespace's quota. Looked at
// again on the next look while the revision object is not there yet.
func (c *Controller) adoptRevision(ctx context.Context, w workload.Workload) {
	rev := w.Template.Annotations[InputsHashAnnotation]
	key := w.Key()
	// Per generation: a change of the template that keeps the config (an image) makes another
	// revision object of the same revision, which owns them too.
	at := adoptedAt{rev: rev, generation: w.Meta.Generation}
	if c.Adopt == nil || c.DryRun || !revisions.IsRevision(rev) || !c.adopted.due(key, at, time.Now()) {
		return
	}
	madeAgain := c.adopted.madeAgain(key)
	owners, err := c.revisionObjects(ctx, w, rev)
	if err != nil || len(owners) == 0 {
		if err != nil {
			klog.V(2).InfoS("could not find the revision object to own the revision's snapshots; looking again later", "workload", w.String(), "revision", rev, "err", err)
		}
		c.adopted.tried(key, at, time.Now())
		return
	}
	ns := w.Meta.Namespace
	snaps, err := revisions.Kept(ctx, revisions.ClientAPI{Core: c.Client.CoreV1()}, ns, rev, w.Template)
	if err != nil && !errors.Is(err, revisions.ErrConfigGone) {
		klog.V(2).InfoS("could not read the revision's index; looking again later", "workload", w.String(), "revision", rev, "err", err)
		c.adopted.tried(key, at, time.Now())
		return
	}
	if snaps != nil { // nil: its index is gone, or not wave's; a snapshot gone is passed over
		objects := []configref.Ref{{Kind: configref.ConfigMap, Namespace: ns, Name: revisions.IndexName(rev)}}
		for ref, snap := range snaps {
			objects = append(objects, configref.Ref{Kind: ref.Kind, Namespace: ns, Name: snap})
		}
		if madeAgain && c.Unadopt != nil {
			c.Unadopt(objects) // the old ones' owner references are not theirs
		}
		for _, owner := range owners {
			if !c.Adopt(ns, owner, rev, objects) {
				c.adopted.tried(key, at, time.Now()) // not queued: asked again a little later
				return
			}
		}
	}
	c.adopted.set(key, at)
}

// revisionObjects are the objects w's controller keeps revision rev in (controlledRevisions):
// more than one where a template change kept the config.
func (c *Controller) revisionObjects(ctx context.Context, w workload.Workload, rev string) ([]revisions.Owner, error) {
	objs, err := c.controlledRevisions(ctx, w)
	if err != nil {
		return nil, err
	}
	var out []revisions.Owner
	for _, o := range objs {
		if o.Template.Annotations[InputsHashAnnotation] == rev {
			out = append(out, o.Owner)
		}
	}
	return out, nil
}

// adoptRetry is how long a workload whose revision object was not found, or whose ask was not
// queued, waits before it is looked for again: looks come often, and each is a list.
const adoptRetry = time.Minute

// adoptedAt is what was given to the revision objects: a revision, for a generation of the
// workload.
type adoptedAt struct {
	rev        string
	generation int64
}

// adoptedRevisions remembers, per workload, what wave gave to its revision objects last, when
// it last tried and could not, and the workloads whose snapshots were made again since.
type adoptedRevisions struct {
	mu    sync.Mutex
	m     map[string]adoptedAt
	tries map[string]adoptTry
	again map[string]bool
}

type adoptTry struct {
	at   adoptedAt
	when time.Time
}

// due says whether w's revision at is to be given to its revision objects now.
func (a *adoptedRevisions) due(key string, at adoptedAt, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m[key] == at {
		return false
	}
	t, tried := a.tries[key]
	return !tried || t.at != at || now.Sub(t.when) >= adoptRetry
}

func (a *adoptedRevisions) tried(key string, at adoptedAt, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tries == nil {
		a.tries = map[string]adoptTry{}
	}
	a.tries[key] = adoptTry{at: at, when: now}
}

// repaired says the workload's snapshots were made again: given to the revision object anew.
func (a *adoptedRevisions) repaired(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, key)
	delete(a.tries, key)
	if a.again == nil {
		a.again = map[string]bool{}
	}
	a.again[key] = true
}

func (a *adoptedRevisions) madeAgain(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.again[key]
}

func (a *adoptedRevisions) set(key string, at adoptedAt) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]adoptedAt{}
	}
	a.m[key] = at
	delete(a.tries, key)
	delete(a.again, key)
}

func (a *adoptedRevisions) forget(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, key)
	delete(a.tries, key)
	delete(a.again, key)
}

// repairRetry is how long after a repair of a revision's snapshots (made, or failed) another is
// not tried: the caches see what was made a moment later, and one that failed is said once.
const repairRetry = 5 * time.Minute

// repairsTried remembers, per workload, the revision whose snapshots were last made again, and
// when.
type repairsTried struct {
	mu sync.Mutex
	m  map[string]adoptTry
}

func (r *repairsTried) due(key, rev string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.m[key]
	return !ok || t.at.rev != rev || now.Sub(t.when) >= repairRetry
}

func (r *repairsTried) tried(key, rev string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]adoptTry{}
	}
	r.m[key] = adoptTry{at: adoptedAt{rev: rev}, when: now}
}

func (r *repairsTried) forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, key)
}
