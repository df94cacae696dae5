// Package autorollback undoes a workload whose config rollout failed, when it asks for that
// (configwave.io/rollback-on-failure: "true") and runs with config revisions, so that the undo
// brings its old config back with its old template: a Deployment, StatefulSet or DaemonSet as
// `kubectl rollout undo` does it, an Argo Rollout as `kubectl argo rollouts abort` does. What
// to write is decided here, as pure functions; the controller reads the ReplicaSets or
// ControllerRevisions and writes.
package autorollback

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configwave/configwave/internal/wave/revisions"
)

// Annotation opts a workload in.
const Annotation = "configwave.io/rollback-on-failure"

// revisionAnnotation is the Deployment controller's revision number, on the Deployment and on
// each of its ReplicaSets.
const revisionAnnotation = "deployment.kubernetes.io/revision"

// annotationsToSkip are the Deployment's own annotations that an undo keeps, as kubectl's
// DeploymentRollbacker keeps them (k8s.io/kubectl/pkg/polymorphichelpers).
var annotationsToSkip = map[string]bool{
	corev1.LastAppliedConfigAnnotation:          true,
	revisionAnnotation:                          true,
	"deployment.kubernetes.io/revision-history": true,
	"deployment.kubernetes.io/desired-replicas": true,
	"deployment.kubernetes.io/max-replicas":     true,
	appsv1.DeprecatedRollbackTo:                 true,
}

// Previous is the ReplicaSet an undo of d goes back to: the one of the highest revision below
// d's own, that d controls (by UID: a ReplicaSet of a Deployment deleted and made again under
// the same name is not its), whose pods are of another config revision than the failed one
// (failed, the template's inputs hash), and whose config is still there to give its pods
// (usable: its index and snapshots; a revision whose config is gone would start its pods on
// the failed live config, and hold them there). An error says why there is none.
func Previous(d *appsv1.Deployment, rss []appsv1.ReplicaSet, inputsHashAnnotation, failed string, usable Usable) (*appsv1.ReplicaSet, error) {
	current, err := strconv.ParseInt(d.Annotations[revisionAnnotation], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s: no revision number (%s): %w", d.Namespace, d.Name, revisionAnnotation, err)
	}
	candidates := []*appsv1.ReplicaSet{}
	for i := range rss {
		rs := &rss[i]
		n, err := strconv.ParseInt(rs.Annotations[revisionAnnotation], 10, 64)
		hash := rs.Spec.Template.Annotations[inputsHashAnnotation]
		owner := metav1.GetControllerOfNoCopy(rs)
		// Only a revision's ReplicaSet: one from before revisions would start pods on the live,
		// failed config, and be held there.
		if err != nil || n >= current || hash == failed || !revisions.IsRevision(hash) || owner == nil || owner.UID != d.UID {
			continue
		}
		candidates = append(candidates, rs)
	}
	slices.SortFunc(candidates, func(a, b *appsv1.ReplicaSet) int {
		na, _ := strconv.ParseInt(a.Annotations[revisionAnnotation], 10, 64)
		nb, _ := strconv.ParseInt(b.Annotations[revisionAnnotation], 10, 64)
		return cmp.Compare(nb, na) // newest first
	})
	var gone []string
	for _, rs := range candidates {
		err := usable(rs.Spec.Template.Annotations[inputsHashAnnotation], &rs.Spec.Template)
		switch {
		case errors.Is(err, ErrConfigGone):
			gone = append(gone, fmt.Sprintf("revision %s: %v", rs.Annotations[revisionAnnotation], err))
			continue
		case err != nil:
			return nil, err // not known: decided again later, never a revision further back for it
		}
		return rs, nil
	}
	if len(gone) > 0 {
		return nil, fmt.Errorf("deployment %s/%s has no revision before %d whose config is still kept (%s): undo it by hand", d.Namespace, d.Name, current, strings.Join(gone, "; "))
	}
	return nil, fmt.Errorf("deployment %s/%s has no revision before %d with other config kept in snapshots to go back to (the first change after revisions were turned on, or revisionHistoryLimit 0): undo it by hand", d.Namespace, d.Name, current)
}

// Usable says whether a revision's config (by its inputs hash and pod template) is there to
// give its pods: nil, an error wrapping ErrConfigGone (the undo passes over it), or another
// error (not known now: the undo is decided again later).
type Usable func(inputsHash string, template *corev1.PodTemplateSpec) error

// ErrConfigGone: a revision's index or a snapshot is gone, or is not wave's.
var ErrConfigGone = revisions.ErrConfigGone

// StillFailed says whether d, read afresh, still runs the template whose rollout failed: the
// template of its newest ReplicaSet of the failed config revision, as the Deployment controller
// compares them (its pod-template-hash label aside). A change made since (an image fixed,
// another rollout, an undo) is not thrown away by an undo.
func StillFailed(d *appsv1.Deployment, rss []appsv1.ReplicaSet, inputsHashAnnotation, failed string) error {
	if d.Spec.Template.Annotations[inputsHashAnnotation] != failed {
		return fmt.Errorf("deployment %s/%s: its pod template is no longer of the failed config: left as it is", d.Namespace, d.Name)
	}
	var newest *appsv1.ReplicaSet
	newestN := int64(-1)
	for i := range rss {
		rs := &rss[i]
		owner := metav1.GetControllerOfNoCopy(rs)
		n, _ := strconv.ParseInt(rs.Annotations[revisionAnnotation], 10, 64)
		if owner == nil || owner.UID != d.UID || rs.Spec.Template.Annotations[inputsHashAnnotation] != failed || n <= newestN {
			continue
		}
		newest, newestN = rs, n
	}
	if newest == nil {
		return fmt.Errorf("deployment %s/%s has no ReplicaSet of the failed config yet: left as it is; undo it by hand if it still fails", d.Namespace, d.Name)
	}
	if !equalIgnoringHash(&d.Spec.Template, &newest.Spec.Template) {
		return fmt.Errorf("deployment %s/%s: its pod template changed since the rollout was judged to have failed (a fix, another change): left as it is", d.Namespace, d.Name)
	}
	return nil
}

func equalIgnoringHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	for _, hash := range []string{appsv1.DefaultDeploymentUniqueLabelKey, "rollouts-pod-template-hash"} { // Argo Rollouts' own
		delete(a.Labels, hash)
		delete(b.Labels, hash)
	}
	return equality.Semantic.DeepEqual(a, b)
}

// Refusal says why a Deployment whose config rollout failed is not undone automatically, or
// "": kubectl refuses to undo a paused Deployment, and a rollout that failed for want of quota
// or capacity (ReplicaFailure) failed for no fault of its config.
func Refusal(d *appsv1.Deployment) string {
	if d.Spec.Paused {
		return fmt.Sprintf("deployment %s/%s is paused, and kubectl refuses to undo a paused Deployment: resume it (kubectl rollout resume deployment/%s -n %s) and undo it by hand if it still fails", d.Namespace, d.Name, d.Name, d.Namespace)
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			return fmt.Sprintf("deployment %s/%s could not create its pods (%s: %s), which is no fault of its config: not undone; raise the quota or the capacity, or undo it by hand", d.Namespace, d.Name, c.Reason, c.Message)
		}
	}
	return ""
}

// Unschedulable says why a Deployment whose rollout missed its progress deadline is not undone
// because its new pods found no room, or "": pods of the failed config revision (their
// ReplicaSet d's, of that revision, in rss) that the scheduler could not place, and every other
// one of them Ready. A pod of it that was placed and is not Ready (a key its env names missing,
// a mount that fails, a probe, a crash) may be the config's fault: then it is undone. A missed
// deadline for want of capacity alone is no fault of the config (a quota's says ReplicaFailure,
// above; capacity says nothing on the Deployment).
func Unschedulable(d *appsv1.Deployment, rss []appsv1.ReplicaSet, pods []corev1.Pod, inputsHashAnnotation, failed string) string {
	ofFailed := map[types.UID]bool{}
	for _, rs := range rss {
		if owner := metav1.GetControllerOfNoCopy(&rs); owner != nil && owner.UID == d.UID && rs.Spec.Template.Annotations[inputsHashAnnotation] == failed {
			ofFailed[rs.UID] = true
		}
	}
	var waiting []string
	for _, p := range pods {
		owner := metav1.GetControllerOfNoCopy(&p)
		if owner == nil || !ofFailed[owner.UID] {
			continue
		}
		unschedulable, ready := false, false
		for _, c := range p.Status.Conditions {
			switch {
			case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable:
				unschedulable = true
			case c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue:
				ready = true
			}
		}
		switch {
		case unschedulable:
			waiting = append(waiting, p.Name)
		case !ready:
			return "" // placed, and not Ready: the config may be at fault
		}
	}
	if len(waiting) == 0 {
		return ""
	}
	slices.Sort(waiting)
	return fmt.Sprintf("deployment %s/%s: its new pods could not be scheduled (%s: no room on any node), which is no fault of its config: not undone; add capacity, or undo it by hand",
		d.Namespace, d.Name, strings.Join(waiting, ", "))
}

// UndoPatch is the JSON patch of `kubectl rollout undo`: rs's template (without its
// pod-template-hash label) and its annotations but the Deployment's own bookkeeping, tested
// against the Deployment's resourceVersion, so that a change made in between is not undone
// blindly (the API server answers 409 and the next look decides again).
//
// set are annotations written with it (wave's note of the undo, on its rollout record): the
// Deployment's annotations go back with the template, and would take the note of the failure
// with them.
func UndoPatch(d *appsv1.Deployment, rs *appsv1.ReplicaSet, set map[string]string) ([]byte, error) {
	annotations := map[string]string{}
	for k := range annotationsToSkip {
		if v, ok := d.Annotations[k]; ok {
			annotations[k] = v
		}
	}
	for k, v := range rs.Annotations {
		if !annotationsToSkip[k] {
			annotations[k] = v
		}
	}
	maps.Copy(annotations, set)
	template := rs.Spec.Template.DeepCopy()
	delete(template.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": d.ResourceVersion},
		{"op": "replace", "path": "/spec/template", "value": template},
		{"op": "replace", "path": "/metadata/annotations", "value": annotations},
	})
}
