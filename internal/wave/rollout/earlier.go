package rollout

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/wave/autorollback"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/workload"
)

// atEarlierRevision answers situation.AtEarlierRevision for w, whose template names no
// revision of wave's while its label names newest: read once per generation of the workload
// (a held workload is looked at on every resync, and its answer changes only with its
// template). A CronJob has no undo: its template is no earlier revision. Where wave may not
// read the revisions, it is taken as an undo, as before this was asked, and said once.
func (c *Controller) atEarlierRevision(ctx context.Context, w workload.Workload, newest string) (bool, error) {
	if w.Kind == workload.CronJob {
		return false, nil
	}
	at := earlierAnswer{uid: w.Meta.UID, generation: w.Meta.Generation, newest: newest}
	if earlier, ok := c.earlier.of(w.Key(), at); ok {
		return earlier, nil
	}
	made, err := c.revisionsMade(ctx, w)
	if apierrors.IsForbidden(err) {
		c.earlier.forbiddenOnce.Do(func() {
			klog.InfoS("a template without wave's revision annotation is taken for an undo: wave may not read the revisions to tell it from a kubectl replace", "workload", w.String(), "err", err)
		})
		return true, nil
	}
	if err != nil {
		return false, err
	}
	at.earlier = autorollback.AtEarlierRevision(made.Template, made.Revisions, InputsHashAnnotation, newest)
	c.earlier.set(w.Key(), at)
	return at.earlier, nil
}

// earlierAnswers keeps atEarlierRevision's answers.
type earlierAnswers struct {
	mu            sync.Mutex
	m             map[string]earlierAnswer
	forbiddenOnce sync.Once
}

type earlierAnswer struct {
	uid        types.UID
	generation int64
	newest     string
	earlier    bool
}

func (e *earlierAnswers) of(key string, at earlierAnswer) (bool, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	got, ok := e.m[key]
	return got.earlier, ok && got.uid == at.uid && got.generation == at.generation && got.newest == at.newest
}

func (e *earlierAnswers) set(key string, at earlierAnswer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]earlierAnswer{}
	}
	e.m[key] = at
}

func (e *earlierAnswers) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}

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
	objs, err := c.controlledRevisions(ctx, w)
	made := make([]autorollback.Made, len(objs))
	for i, o := range objs {
		made[i] = o.Made
	}
	return made, err
}

// revisionObject is one revision object of a workload: what autorollback compares of it, and
// how an owner reference names it.
type revisionObject struct {
	autorollback.Made
	Owner revisions.Owner
}

// controlledRevisions lists the revision objects w's own controller keeps, read from the API
// server: a Deployment's or Argo Rollout's ReplicaSets, a StatefulSet's or DaemonSet's
// ControllerRevisions (one whose data holds no template is passed over), each only when w
// controls it (by UID); none for a CronJob.
func (c *Controller) controlledRevisions(ctx context.Context, w workload.Workload) ([]revisionObject, error) {
	sel, err := metav1.LabelSelectorAsSelector(w.Selector)
	if err != nil {
		return nil, fmt.Errorf("its selector: %w", err)
	}
	ns, opts := w.Meta.Namespace, metav1.ListOptions{LabelSelector: sel.String()}
	controlled := func(o metav1.Object) bool {
		ref := metav1.GetControllerOfNoCopy(o)
		return ref != nil && ref.UID == w.Meta.UID
	}
	var out []revisionObject
	switch w.Kind {
	case workload.Deployment, workload.ArgoRollout:
		list, err := c.Client.AppsV1().ReplicaSets(ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list its ReplicaSets: %w", err)
		}
		number, history := "deployment.kubernetes.io/revision", "deployment.kubernetes.io/revision-history"
		if w.Kind == workload.ArgoRollout {
			number, history = "rollout.argoproj.io/revision", "rollout.argoproj.io/revision-history"
		}
		for i := range list.Items {
			if rs := &list.Items[i]; controlled(rs) {
				n, _ := strconv.ParseInt(rs.Annotations[number], 10, 64)
				out = append(out, revisionObject{
					Made:  autorollback.Made{Template: rs.Spec.Template, Created: rs.CreationTimestamp.Time, Number: n, CameBack: rs.Annotations[history] != ""},
					Owner: revisions.Owner{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID}})
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
				continue // no template to compare: not this one
			}
			out = append(out, revisionObject{
				Made:  autorollback.Made{Template: template, Created: cr.CreationTimestamp.Time},
				Owner: revisions.Owner{APIVersion: "apps/v1", Kind: "ControllerRevision", Name: cr.Name, UID: cr.UID, Parent: w.Meta.UID}})
		}
	}
	return out, nil
}
