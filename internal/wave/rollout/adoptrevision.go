package rollout

import (
	"context"
	"errors"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/autorollback"
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
	if c.Adopt == nil || c.DryRun || !revisions.IsRevision(rev) || c.adopted.is(key, rev) {
		return
	}
	madeAgain := c.adopted.madeAgain(key)
	owner, found, err := c.revisionObject(ctx, w, rev)
	if err != nil || !found {
		if err != nil {
			klog.V(2).InfoS("could not find the revision object to own the revision's snapshots; looking again later", "workload", w.String(), "revision", rev, "err", err)
		}
		return
	}
	ns := w.Meta.Namespace
	snaps, err := revisions.Kept(ctx, revisions.ClientAPI{Core: c.Client.CoreV1()}, ns, rev, w.Template)
	if err != nil && !errors.Is(err, revisions.ErrConfigGone) {
		klog.V(2).InfoS("could not read the revision's index; looking again later", "workload", w.String(), "revision", rev, "err", err)
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
		if !c.Adopt(ns, owner, rev, objects) {
			return // dropped with too many waiting: asked again on the next look
		}
	}
	c.adopted.set(key, rev)
}

// revisionObject finds the object w's controller keeps revision rev in, among those w
// controls (by UID), read afresh: a Deployment's or Argo Rollout's ReplicaSet, a StatefulSet's
// or DaemonSet's ControllerRevision.
func (c *Controller) revisionObject(ctx context.Context, w workload.Workload, rev string) (revisions.Owner, bool, error) {
	sel, err := metav1.LabelSelectorAsSelector(w.Selector)
	if err != nil {
		return revisions.Owner{}, false, fmt.Errorf("its selector: %w", err)
	}
	ns, opts := w.Meta.Namespace, metav1.ListOptions{LabelSelector: sel.String()}
	controlled := func(o metav1.Object) bool {
		ref := metav1.GetControllerOfNoCopy(o)
		return ref != nil && ref.UID == w.Meta.UID
	}
	switch w.Kind {
	case workload.Deployment, workload.ArgoRollout:
		list, err := c.Client.AppsV1().ReplicaSets(ns).List(ctx, opts)
		if err != nil {
			return revisions.Owner{}, false, fmt.Errorf("list its ReplicaSets: %w", err)
		}
		for i := range list.Items {
			if rs := &list.Items[i]; controlled(rs) && rs.Spec.Template.Annotations[InputsHashAnnotation] == rev {
				return revisions.Owner{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID}, true, nil
			}
		}
	case workload.StatefulSet, workload.DaemonSet:
		list, err := c.Client.AppsV1().ControllerRevisions(ns).List(ctx, opts)
		if err != nil {
			return revisions.Owner{}, false, fmt.Errorf("list its ControllerRevisions: %w", err)
		}
		for i := range list.Items {
			cr := &list.Items[i]
			if t, err := autorollback.RevisionTemplate(cr); err == nil && controlled(cr) && t.Annotations[InputsHashAnnotation] == rev {
				return revisions.Owner{APIVersion: "apps/v1", Kind: "ControllerRevision", Name: cr.Name, UID: cr.UID, Parent: w.Meta.UID}, true, nil
			}
		}
	}
	return revisions.Owner{}, false, nil
}

// adoptedRevisions remembers, per workload, the revision whose snapshots wave gave to its
// revision object last, and the workloads whose snapshots were made again since.
type adoptedRevisions struct {
	mu    sync.Mutex
	m     map[string]string
	again map[string]bool
}

// repaired says the workload's snapshots were made again: given to the revision object anew.
func (a *adoptedRevisions) repaired(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, key)
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

func (a *adoptedRevisions) is(key, rev string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.m[key] == rev
}

func (a *adoptedRevisions) set(key, rev string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]string{}
	}
	a.m[key] = rev
	delete(a.again, key)
}

func (a *adoptedRevisions) forget(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, key)
	delete(a.again, key)
}
