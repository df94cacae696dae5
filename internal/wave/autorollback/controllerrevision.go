package autorollback

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/configwave/configwave/internal/wave/revisions"
)

// A StatefulSet's and a DaemonSet's revisions are ControllerRevisions, each holding its
// template as a strategic merge patch of spec.template; kubectl's StatefulSetRollbacker and
// DaemonSetRollbacker undo by applying that patch (k8s.io/kubectl/pkg/polymorphichelpers).

// RevisionTemplate is the pod template a ControllerRevision holds.
func RevisionTemplate(cr *appsv1.ControllerRevision) (corev1.PodTemplateSpec, error) {
	var data struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(cr.Data.Raw, &data); err != nil {
		return corev1.PodTemplateSpec{}, fmt.Errorf("ControllerRevision %s: its data is not a template patch: %w", cr.Name, err)
	}
	return data.Spec.Template, nil
}

// PreviousRevision is the ControllerRevision an undo of a StatefulSet or DaemonSet (what, as
// kubectl takes it: "statefulset/db -n shop") goes back to, among the revisions its controller owns (crs): the one
// of the highest revision below the failed one's (the newest whose template has the inputs
// hash failed) whose template is of another config revision. bad is the failed one, whose
// name its pods carry in their controller-revision-hash label. An error says why there is
// none.
func PreviousRevision(what string, crs []appsv1.ControllerRevision, inputsHashAnnotation, failed string, usable Usable) (prev, bad *appsv1.ControllerRevision, err error) {
	hashes := make([]string, len(crs))
	templates := make([]*corev1.PodTemplateSpec, len(crs))
	for i := range crs {
		t, err := RevisionTemplate(&crs[i])
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", what, err)
		}
		templates[i] = &t
		hashes[i] = t.Annotations[inputsHashAnnotation]
		if hashes[i] == failed && (bad == nil || crs[i].Revision > bad.Revision) {
			bad = &crs[i]
		}
	}
	if bad == nil {
		return nil, nil, fmt.Errorf("%s has no ControllerRevision of the failed template yet: undo it by hand (kubectl rollout undo %s)", what, what)
	}
	var candidates []int
	for i := range crs {
		// Only a revision's template: one from before revisions would start pods on the live,
		// failed config, and be held there.
		if crs[i].Revision < bad.Revision && hashes[i] != failed && revisions.IsRevision(hashes[i]) {
			candidates = append(candidates, i)
		}
	}
	slices.SortFunc(candidates, func(a, b int) int { return cmp.Compare(crs[b].Revision, crs[a].Revision) }) // newest first
	var gone []string
	for _, i := range candidates {
		// Only one whose config is still there to give its pods.
		err := usable(hashes[i], templates[i])
		switch {
		case errors.Is(err, ErrConfigGone):
			gone = append(gone, fmt.Sprintf("revision %d: %v", crs[i].Revision, err))
			continue
		case err != nil:
			return nil, nil, err
		}
		return &crs[i], bad, nil
	}
	if len(gone) > 0 {
		return nil, nil, fmt.Errorf("%s has no revision before %d whose config is still kept (%s): undo it by hand", what, bad.Revision, strings.Join(gone, "; "))
	}
	return nil, nil, fmt.Errorf("%s has no revision before %d with other config kept in snapshots to go back to (the first change after revisions were turned on, or revisionHistoryLimit 0): undo it by hand", what, bad.Revision)
}

// RevisionPatch is the strategic merge patch kubectl's undo applies, cr's data, with the
// resourceVersion the workload was read at, which the API server takes as a precondition: a
// change made in between is not undone blindly (409, and the next look decides again).
func RevisionPatch(resourceVersion string, cr *appsv1.ControllerRevision, set map[string]string) ([]byte, error) {
	var patch map[string]any
	if err := json.Unmarshal(cr.Data.Raw, &patch); err != nil {
		return nil, fmt.Errorf("ControllerRevision %s: its data is not a template patch: %w", cr.Name, err)
	}
	if patch == nil {
		return nil, fmt.Errorf("ControllerRevision %s: it holds no template patch", cr.Name)
	}
	meta := map[string]any{"resourceVersion": resourceVersion}
	if len(set) > 0 {
		meta["annotations"] = set // written with it: wave's note of the undo
	}
	patch["metadata"] = meta
	return json.Marshal(patch)
}

// StuckPods are the pods a StatefulSet of OrderedReady pods would wait for forever after an
// undo: those of the failed revision (bad, by their controller-revision-hash label), not
// going, and not Ready. Its controller replaces a pod of an old revision only once every pod
// before it is available, so the pod that crash-loops on the failed config stays; Kubernetes'
// documentation says to delete it by hand after reverting the template ("Forced rollback").
// A pod that is Ready now is never one: a crash loop up for a moment (Flickering) is deleted at
// its next fall, which the caller waits for (the admission policy lets wave delete only a pod
// that is not Ready, so that a healthy pod that restarted once is never deleted). Pods of the set only: the caller lists them by the
// set's selector and controller.
func StuckPods(pods []corev1.Pod, bad string) []corev1.Pod {
	var stuck []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Labels[appsv1.ControllerRevisionHashLabelKey] != bad {
			continue
		}
		if ready, _ := podReady(&p); ready {
			continue
		}
		stuck = append(stuck, p)
	}
	return stuck
}

func podReady(p *corev1.Pod) (bool, time.Time) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue, c.LastTransitionTime.Time
		}
	}
	return false, time.Time{}
}

// Flickering are the pods of the failed revision that are Ready now but restarted: a crash
// loop up for a moment, which StuckPods leaves (the admission policy lets wave delete only a
// pod that is not Ready) and the caller looks at again until it falls or is replaced.
func Flickering(pods []corev1.Pod, bad string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Labels[appsv1.ControllerRevisionHashLabelKey] != bad {
			continue
		}
		if ready, _ := podReady(&p); ready && restarted(&p) {
			out = append(out, p)
		}
	}
	return out
}

func restarted(p *corev1.Pod) bool {
	for _, c := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if c.RestartCount > 0 {
			return true
		}
	}
	return false
}

// RunsRevision says whether template, a StatefulSet's or DaemonSet's read afresh, is the one cr
// holds, as their controllers compare them.
func RunsRevision(cr *appsv1.ControllerRevision, template *corev1.PodTemplateSpec) bool {
	t, err := RevisionTemplate(cr)
	return err == nil && equality.Semantic.DeepEqual(&t, template)
}
