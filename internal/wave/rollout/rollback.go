package rollout

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/wave/autorollback"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/workload"
)

// rollBackOnFailure undoes a workload whose config rollout just failed, once, when it asks for
// that (configwave.io/rollback-on-failure) and runs with revisions: the undo's pods then read
// the config the workload ran before, from its snapshots, and wave holds the undo
// (heldByRollback) until the config changes again, so it never loops. Without revisions an
// undo would bring back the old template on the new config, so it is refused, and said.
func (c *Controller) rollBackOnFailure(ctx context.Context, w workload.Workload, change string) {
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
	to, err := c.undo(ctx, w, failed)
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

// undo writes the undo of w's failed revision and says what it went back to.
func (c *Controller) undo(ctx context.Context, w workload.Workload, failed string) (string, error) {
	ns, name := w.Meta.Namespace, w.Meta.Name
	opts := metav1.PatchOptions{FieldManager: "configwave-wave"}
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
		var owned []appsv1.ReplicaSet
		for _, rs := range list.Items {
			if ref := metav1.GetControllerOfNoCopy(&rs); ref != nil && ref.Kind == "Deployment" && ref.Name == name {
				owned = append(owned, rs)
			}
		}
		// Read afresh: the cache is behind wave's own note of the failure, and the patch is
		// tested against the version read. A status write in between is tried again; a change
		// of the template in between (another undo, a new rollout) stops it.
		var prev *appsv1.ReplicaSet
		err = retry.OnError(retry.DefaultBackoff, func(err error) bool { return apierrors.IsInvalid(err) || apierrors.IsConflict(err) }, func() error {
			d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("read the Deployment: %w", err)
			}
			if d.Spec.Template.Annotations[InputsHashAnnotation] != failed {
				return fmt.Errorf("its template changed since the rollout failed: left as it is")
			}
			if prev, err = autorollback.Previous(d, owned, InputsHashAnnotation, failed); err != nil {
				return err
			}
			patch, err := autorollback.UndoPatch(d, prev)
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
		return "revision " + prev.Annotations["deployment.kubernetes.io/revision"] + ", ReplicaSet " + prev.Name, nil
	case workload.ArgoRollout:
		if c.Dynamic == nil {
			return "", fmt.Errorf("no client for Argo Rollouts")
		}
		if _, err := c.Dynamic.Resource(argoRollouts).Namespace(ns).Patch(ctx, name, types.MergePatchType, autorollback.AbortPatch, opts, "status"); err != nil {
			return "", fmt.Errorf("abort the Rollout: %w", err)
		}
		return "its stable ReplicaSet (aborted)", nil
	}
	return "", fmt.Errorf("a %s is not undone automatically yet: undo it by hand (kubectl rollout undo %s/%s)", w.Kind, w.Kind, name)
}
