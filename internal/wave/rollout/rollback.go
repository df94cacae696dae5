package rollout

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/wave/autorollback"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/workload"
)

// rollBackOnFailure undoes a workload whose config rollout just failed, once, when it asks for
// that (configwave.io/rollback-on-failure) and runs with revisions: the undo's pods then read
// the config the workload ran before, from its snapshots, and wave holds the undo
// (heldByRollback) until the config changes again, so it never loops. Without revisions an
// undo would bring back the old template on the new config, so it is refused, and said.
func (c *Controller) rollBackOnFailure(ctx context.Context, w workload.Workload, change string, rec rolloutrecord.Record) {
	on, err := strconv.ParseBool(w.Meta.Annotations[autorollback.Annotation])
	if err != nil || !on {
		return
	}
	revs, _ := revisionsOn(c.Revisions, w.Meta.Annotations[podrefs.RevisionsAnnotation], workload.RestartsInPlace(w))
	failed := w.Template.Annotations[InputsHashAnnotation]
	if !revs || !revisions.IsRevision(failed) {
		c.Recorder.Event(w.Object, corev1.EventTypeWarning, "RollbackRefused", autorollback.Annotation+" needs config revisions (configwave.io/revisions: \"true\", or --config-revisions) and a rollout made with them: an undo would bring back the old template on the new config")
		return
	}
	if c.DryRun {
		c.Recorder.Eventf(w.Object, corev1.EventTypeNormal, "ConfigRollbackStarted", "dry run: would undo the failed %s change", change)
		return
	}
	// The record of the failed rollout goes with the undo, noted as undone: the Deployment's
	// annotations go back with its template, and the undo's own rollout must not be reported
	// as that change rolled out.
	rec.UndoneFrom, rec.UndoneAt = failed, time.Now().UTC().Truncate(time.Second)
	to, err := c.undo(ctx, w, failed, map[string]string{rolloutrecord.Annotation: rec.String()})
	if err != nil {
		c.Recorder.Eventf(w.Object, corev1.EventTypeWarning, "RollbackFailed", "the rollout of the %s change failed, and undoing it failed too: %v; undo it by hand (kubectl rollout undo)", change, err)
		klog.ErrorS(err, "automatic rollback failed", "workload", w.String())
		return
	}
	c.Metrics.Rollbacks.WithLabelValues(string(w.Kind)).Inc()
	msg := fmt.Sprintf("the rollout of the %s change failed: undone to %s (%s); wave holds it there until the config changes again", change, to, autorollback.Annotation)
	c.Recorder.Event(w.Object, corev1.EventTypeNormal, "ConfigRollbackStarted", msg)
	klog.InfoS("undid a failed config rollout", "workload", w.String(), "change", change, "to", to)
	c.alert(fmt.Sprintf("configwave: %s: %s.", w, msg))
}

var argoRollouts = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

// UndoFieldManager is the field manager of wave's automatic undo, apart from the annotations'
// configwave-wave: an undo takes the template (the image among it), and a GitOps tool told to
// ignore what configwave-wave owns (docs/gitops.md) must still see that drift from Git.
const UndoFieldManager = "configwave-wave-undo"

// undo writes the undo of w's failed revision and says what it went back to.
func (c *Controller) undo(ctx context.Context, w workload.Workload, failed string, note map[string]string) (string, error) {
	ns, name := w.Meta.Namespace, w.Meta.Name
	opts := metav1.PatchOptions{FieldManager: UndoFieldManager}
	switch w.Kind {
	case workload.Deployment:
		sel, err := metav1.LabelSelectorAsSelector(w.Selector)
		if err != nil {
			return "", fmt.Errorf("its selector: %w", err)
		}
		list, err := c.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return "", fmt.Errorf("list its ReplicaSets: %w", err)
		}
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return "", fmt.Errorf("list its pods: %w", err)
		}
		// Read afresh: the cache is behind wave's own note of the failure, and the patch is
		// tested against the version read. A status write in between is tried again; a change
		// of the template in between (another undo, a new rollout, an image fixed since the
		// rollout was judged) stops it.
		var prev *appsv1.ReplicaSet
		var passed []string
		err = retry.OnError(retry.DefaultBackoff, func(err error) bool { return apierrors.IsInvalid(err) || apierrors.IsConflict(err) }, func() error {
			d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("read the Deployment: %w", err)
			}
			if err := autorollback.StillFailed(d, list.Items, InputsHashAnnotation, failed); err != nil {
				return err
			}
			if why := cmp.Or(autorollback.Refusal(d), autorollback.Unschedulable(d, list.Items, pods.Items, InputsHashAnnotation, failed)); why != "" {
				return errors.New(why)
			}
			passed = nil
			if prev, err = autorollback.Previous(d, list.Items, InputsHashAnnotation, failed, c.revisionUsable(ctx, ns, &passed)); err != nil {
				return err
			}
			patch, err := autorollback.UndoPatch(d, prev, note)
			if err != nil {
				return err
			}
			if _, err := c.Client.AppsV1().Deployments(ns).Patch(ctx, name, types.JSONPatchType, patch, opts); err != nil {
				return fmt.Errorf("patch the Deployment: %w", err)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
		return "revision " + prev.Annotations["deployment.kubernetes.io/revision"] + ", ReplicaSet " + prev.Name + passedOver(passed), nil
	case workload.StatefulSet, workload.DaemonSet:
		return c.undoToControllerRevision(ctx, w, failed, note)
	case workload.ArgoRollout:
		if c.Dynamic == nil {
			return "", fmt.Errorf("no client for Argo Rollouts")
		}
		// Read afresh and tested against the version read, as a Deployment's undo: a fix made
		// since the rollout was judged is not aborted; one aborted already (its analysis failed)
		// is undone as it stands.
		ri := c.Dynamic.Resource(argoRollouts).Namespace(ns)
		err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			r, err := ri.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("read the Rollout: %w", err)
			}
			if err := autorollback.RolloutStillFailed(r, InputsHashAnnotation, failed, w.Meta.Generation); err != nil {
				return err
			}
			patch, err := autorollback.AbortPatchAt(r.GetResourceVersion())
			if err != nil {
				return err
			}
			if _, err := ri.Patch(ctx, name, types.MergePatchType, patch, opts, "status"); err != nil {
				return fmt.Errorf("abort the Rollout: %w", err)
			}
			return nil
		})
		to := "its stable ReplicaSet (aborted)"
		switch {
		case errors.Is(err, autorollback.ErrAbortedAlready):
			to = "its stable ReplicaSet (aborted already)"
		case err != nil:
			return "", err
		}
		if b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": note}}); err == nil && len(note) > 0 {
			if _, err := ri.Patch(ctx, name, types.MergePatchType, b, opts); err != nil {
				klog.ErrorS(err, "the undo is made; its note on the rollout record is not", "workload", w.String())
			}
		}
		return to, nil
	}
	return "", fmt.Errorf("a %s is not undone automatically: undo it by hand", w.Kind)
}

// judgedSpec says whether a StatefulSet or DaemonSet read afresh still runs the template whose
// rollout was judged to have failed: of the failed config revision, and at the generation wave
// judged, or (its cache a write behind) still the template of the failed ControllerRevision bad.
// Any change since (an image fixed, another rollout) stops the undo. Not the cached template:
// wave's cache keeps a slimmed one.
func judgedSpec(generation int64, template *corev1.PodTemplateSpec, judged workload.Workload, failed string, bad *appsv1.ControllerRevision) error {
	if template.Annotations[InputsHashAnnotation] != failed || generation != judged.Meta.Generation && !autorollback.RunsRevision(bad, template) {
		return fmt.Errorf("its spec changed since the rollout was judged to have failed (a new rollout, an undo, a fix: generation %d, judged at %d): left as it is", generation, judged.Meta.Generation)
	}
	return nil
}

// revisionUsable says whether a revision's config is still there to give its pods: its index
// and every snapshot the index names, all wave's (read from the API server: an undo is rare, and
// the caches keep digests, not an index's entries); a revision whose pods name no source needs
// none. An undo to a revision without them would start its pods on the failed live config, and
// hold them there. Only NotFound, or an object that is not wave's, counts as gone: any other
// error stops the undo, to be decided again, rather than send it further back. passed collects
// the revisions gone, for the Event.
func (c *Controller) revisionUsable(ctx context.Context, ns string, passed *[]string) autorollback.Usable {
	return func(inputsHash string, template *corev1.PodTemplateSpec) error {
		_, err := revisions.Kept(ctx, revisions.ClientAPI{Core: c.Client.CoreV1()}, ns, inputsHash, template)
		if errors.Is(err, autorollback.ErrConfigGone) {
			*passed = append(*passed, inputsHash+" ("+err.Error()+")")
		}
		return err
	}
}

// undoToControllerRevision undoes a StatefulSet or DaemonSet as kubectl rollout undo does, to
// the revision autorollback.PreviousRevision picks, read afresh and tested against the
// resourceVersion read. A StatefulSet of OrderedReady pods then waits forever for its pod that
// crash-loops on the failed config, so that pod is deleted once the set's controller took the
// undo, as Kubernetes' documentation says to do by hand ("Forced rollback").
func (c *Controller) undoToControllerRevision(ctx context.Context, w workload.Workload, failed string, note map[string]string) (string, error) {
	ns, name := w.Meta.Namespace, w.Meta.Name
	what := strings.ToLower(string(w.Kind)) + "/" + name + " -n " + ns // as kubectl takes it
	sel, err := metav1.LabelSelectorAsSelector(w.Selector)
	if err != nil {
		return "", fmt.Errorf("its selector: %w", err)
	}
	list, err := c.Client.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return "", fmt.Errorf("list its ControllerRevisions: %w", err)
	}
	var owned []appsv1.ControllerRevision
	for _, cr := range list.Items {
		if ref := metav1.GetControllerOfNoCopy(&cr); ref != nil && ref.Kind == string(w.Kind) && ref.UID == w.Meta.UID {
			owned = append(owned, cr)
		}
	}
	var prev, bad *appsv1.ControllerRevision
	var sts *appsv1.StatefulSet
	var passed []string
	err = retry.OnError(retry.DefaultBackoff, func(err error) bool { return apierrors.IsInvalid(err) || apierrors.IsConflict(err) }, func() error {
		var template *corev1.PodTemplateSpec
		var resourceVersion string
		var generation int64
		if w.Kind == workload.StatefulSet {
			s, err := c.Client.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("read the StatefulSet: %w", err)
			}
			sts, template, resourceVersion, generation = s, &s.Spec.Template, s.ResourceVersion, s.Generation
		} else {
			d, err := c.Client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("read the DaemonSet: %w", err)
			}
			template, resourceVersion, generation = &d.Spec.Template, d.ResourceVersion, d.Generation
		}
		passed = nil
		if prev, bad, err = autorollback.PreviousRevision(what, owned, InputsHashAnnotation, failed, c.revisionUsable(ctx, ns, &passed)); err != nil {
			return err
		}
		if err := judgedSpec(generation, template, w, failed, bad); err != nil {
			return err
		}
		patch, err := autorollback.RevisionPatch(resourceVersion, prev, note)
		if err != nil {
			return err
		}
		if w.Kind == workload.StatefulSet {
			sts, err = c.Client.AppsV1().StatefulSets(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: UndoFieldManager})
		} else {
			_, err = c.Client.AppsV1().DaemonSets(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: UndoFieldManager})
		}
		if err != nil {
			return fmt.Errorf("patch the %s: %w", w.Kind, err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	to := fmt.Sprintf("revision %d, ControllerRevision %s", prev.Revision, prev.Name) + passedOver(passed)
	if sts == nil || sts.Spec.PodManagementPolicy == appsv1.ParallelPodManagement {
		return to, nil
	}
	deleted, left, err := c.deleteStuckPods(ctx, sts, sel, bad.Name)
	if len(deleted) > 0 {
		to += "; deleted pod " + strings.Join(deleted, ", pod ") + ", not available on the failed config, which its OrderedReady pods would wait for forever"
	}
	if err != nil {
		// The undo is made and stands; what is left is the controller's wait.
		msg := fmt.Sprintf("undone to %s, but a StatefulSet of OrderedReady pods waits for its pods of the failed config, which wave could not delete: %v", to, err)
		if len(left) > 0 {
			msg += "; delete them by hand: kubectl delete pod -n " + sts.Namespace + " " + strings.Join(left, " ")
		}
		c.Recorder.Event(w.Object, corev1.EventTypeWarning, "RollbackIncomplete", msg)
		klog.ErrorS(err, "undid a failed config rollout, but could not delete the pods its StatefulSet waits for", "workload", w.String(), "pods", left)
	}
	return to, nil
}

// deleteStuckPods deletes the pods of sts that an OrderedReady StatefulSet waits for after an
// undo (autorollback.StuckPods), once its controller has taken the undo (it has seen the
// undo's generation and its update revision is no longer the failed one; it may be a new
// ControllerRevision with the old template, when defaulting changed since), so that no pod is
// made again on the failed template. Each delete is preconditioned on the pod's UID: one
// replaced meanwhile is not its to delete. It says which pods it deleted, and which it could
// not (left) with the first error.
func (c *Controller) deleteStuckPods(ctx context.Context, sts *appsv1.StatefulSet, sel labels.Selector, bad string) (deleted, left []string, err error) {
	ns, name, generation := sts.Namespace, sts.Name, sts.Generation
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := c.Client.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("read the StatefulSet: %w", err)
		}
		return s.Status.ObservedGeneration >= generation && s.Status.UpdateRevision != "" && s.Status.UpdateRevision != bad, nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("its controller did not take the undo within 30s: %w", err)
	}
	// A pod of the failed config that crash-loops may be Ready for a moment as it is looked at:
	// it is looked at again until it falls (then deleted) or is replaced, for stuckWithin.
	deadline := time.Now().Add(stuckWithin)
	var first error
	for {
		owned, err := c.ownedPods(ctx, sts, sel)
		if err != nil {
			return deleted, left, err
		}
		left, first = nil, nil
		for _, p := range autorollback.StuckPods(owned, bad) {
			// The UID alone: kubelet writes the status of a crash-looping pod at every restart.
			uid := p.UID
			err := c.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			switch {
			case err == nil:
				deleted = append(deleted, p.Name)
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				// gone, or already replaced by another pod of that name
			default:
				left = append(left, p.Name)
				if first == nil {
					first = fmt.Errorf("delete pod %s: %w", p.Name, err)
				}
			}
		}
		flickering := autorollback.Flickering(owned, bad)
		if first != nil || len(flickering) == 0 || time.Now().After(deadline) {
			for _, p := range flickering {
				left = append(left, p.Name)
				if first == nil {
					first = fmt.Errorf("pod %s of the failed config restarts, but was Ready each time wave looked for %s", p.Name, stuckWithin)
				}
			}
			return deleted, left, first
		}
		select {
		case <-ctx.Done():
			return deleted, left, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// passedOver says which newer revisions an undo passed over, their config gone.
func passedOver(passed []string) string {
	if len(passed) == 0 {
		return ""
	}
	return ", passing over revisions whose config is gone: " + strings.Join(passed, "; ")
}

// stuckWithin bounds the wait for a crash-looping pod of the failed config to fall, so that
// it can be deleted.
const stuckWithin = time.Minute

// ownedPods lists the pods sts controls (by UID).
func (c *Controller) ownedPods(ctx context.Context, sts *appsv1.StatefulSet, sel labels.Selector) ([]corev1.Pod, error) {
	pods, err := c.Client.CoreV1().Pods(sts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list its pods (RBAC: list on pods): %w", err)
	}
	var owned []corev1.Pod
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOfNoCopy(&p); ref != nil && ref.Kind == "StatefulSet" && ref.UID == sts.UID {
			owned = append(owned, p)
		}
	}
	return owned, nil
}
