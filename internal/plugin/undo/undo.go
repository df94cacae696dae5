// Package undo decides an undo of a workload to a revision chosen by its config, for kubectl
// configwave: whether it may go ahead, and the patch that does it, as kubectl rollout undo
// and kubectl argo rollouts undo write it. Pure functions: the command reads and writes.
package undo

import (
	"encoding/json"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/configwave/configwave/internal/plugin/history"
	"github.com/configwave/configwave/internal/wave/revisions"
)

// Refusal says why an undo of what (as kubectl names it) to revision to must not go ahead,
// or "" when it may. revs are the workload's revisions as history reads them (newest last);
// allowLive lets a revision that keeps no config go ahead on the live config, as kubectl
// rollout undo would.
func Refusal(what string, current *corev1.PodTemplateSpec, revs []history.Revision, to *history.Revision, allowLive bool) string {
	if len(revs) > 0 && revs[len(revs)-1].Number == to.Number && equality.Semantic.DeepEqual(withoutHash(&to.Template), withoutHash(current)) {
		return fmt.Sprintf("%s is at revision %d already", what, to.Number)
	}
	switch {
	case to.Gone != "":
		return fmt.Sprintf("revision %d of %s cannot give its pods their config: %s. Its pods would read today's config; "+
			"pick a revision whose config is kept (kubectl configwave history %s)", to.Number, what, to.Gone, what)
	case !revisions.IsRevision(to.InputsHash) && len(to.Config) > 0 && !allowLive:
		return fmt.Sprintf("revision %d of %s keeps no config (revisions were off for it): its pods would read today's config. "+
			"Use kubectl rollout undo for that, or pass --allow-live-config", to.Number, what)
	}
	return ""
}

// rolloutPodTemplateHash is Argo Rollouts' label on a ReplicaSet's pod template, which its
// `undo` removes as kubectl's removes pod-template-hash.
const rolloutPodTemplateHash = "rollouts-pod-template-hash"

// RolloutPatch is `kubectl argo rollouts undo`: a Rollout's template put back to rs's,
// without the hash label, tested against the resourceVersion read (a JSON patch).
func RolloutPatch(resourceVersion string, rs *appsv1.ReplicaSet) ([]byte, error) {
	t := rs.Spec.Template.DeepCopy()
	delete(t.Labels, rolloutPodTemplateHash)
	return templatePatch(resourceVersion, "/spec/template", t)
}

// CronJobPatch puts a CronJob's job template's pod template back to the one job ran, without
// the labels the Job controller added to it (a JSON patch tested against the resourceVersion).
func CronJobPatch(resourceVersion string, job *batchv1.Job) ([]byte, error) {
	t := history.JobTemplate(job)
	return templatePatch(resourceVersion, "/spec/jobTemplate/spec/template", &t)
}

func templatePatch(resourceVersion, path string, t *corev1.PodTemplateSpec) ([]byte, error) {
	t.Labels = maps.Clone(t.Labels)
	return json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": resourceVersion},
		{"op": "replace", "path": path, "value": t},
	})
}

// withoutHash is t without the label its controller adds to tell revisions apart, for a
// comparison with the workload's own template.
func withoutHash(t *corev1.PodTemplateSpec) *corev1.PodTemplateSpec {
	c := t.DeepCopy()
	delete(c.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(c.Labels, rolloutPodTemplateHash)
	if len(c.Labels) == 0 {
		c.Labels = nil
	}
	return c
}
