package rollout

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/wave/autorollback"
	"github.com/configwave/configwave/internal/wave/workload"
)

// madeRevisions is a workload's template, read afresh (the cache keeps only what wave's
// decisions read of it), and the revisions its own controller keeps.
type madeRevisions struct {
	Template  *corev1.PodTemplateSpec
	Revisions []autorollback.Made
}

// revisionsMade reads w's template and lists the revisions its own controller keeps, for
// autorollback.AtEarlierRevision: a Deployment's or Argo Rollout's ReplicaSets, a
// StatefulSet's or DaemonSet's ControllerRevisions, each only when w controls it (by UID).
// Read from the API server, and only for a template that names no revision of wave's while
// wave rolled one: rare.
func (c *Controller) revisionsMade(ctx context.Context, w workload.Workload) (madeRevisions, error) {
	typ, err := workload.TypeOf(w.Kind)
	if err != nil {
		return madeRevisions{}, err
	}
	fresh, err := typ.Get(ctx, c.clients(), w.Meta.Namespace, w.Meta.Name)
	if err != nil {
		return madeRevisions{}, fmt.Errorf("read %s: %w", w, err)
	}
	if fresh.Meta.UID != w.Meta.UID || fresh.Template == nil {
		return madeRevisions{}, fmt.Errorf("read %s: made again meanwhile", w)
	}
	revs, err := c.revisionsOf(ctx, w)
	return madeRevisions{Template: fresh.Template, Revisions: revs}, err
}

func (c *Controller) revisionsOf(ctx context.Context, w workload.Workload) ([]autorollback.Made, error) {
	sel, err := metav1.LabelSelectorAsSelector(w.Selector)
	if err != nil {
		return nil, fmt.Errorf("its selector: %w", err)
	}
	ns, opts := w.Meta.Namespace, metav1.ListOptions{LabelSelector: sel.String()}
	controlled := func(o metav1.Object) bool {
		ref := metav1.GetControllerOfNoCopy(o)
		return ref != nil && ref.UID == w.Meta.UID
	}
	var out []autorollback.Made
	switch w.Kind {
	case workload.Deployment, workload.ArgoRollout:
		list, err := c.Client.AppsV1().ReplicaSets(ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list its ReplicaSets: %w", err)
		}
		for i := range list.Items {
			if rs := &list.Items[i]; controlled(rs) {
				out = append(out, autorollback.Made{Template: rs.Spec.Template, Created: rs.CreationTimestamp.Time})
			}
		}
	case workload.StatefulSet, workload.DaemonSet:
		list, err := c.Client.AppsV1().ControllerRevisions(ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list its ControllerRevisions: %w", err)
		}
		for i := range list.Items {
			cr := &list.Items[i]
			if !controlled(cr) {
				continue
			}
			template, err := autorollback.RevisionTemplate(cr)
			if err != nil {
				return nil, err
			}
			out = append(out, autorollback.Made{Template: template, Created: cr.CreationTimestamp.Time})
		}
	}
	return out, nil
}
