// Package history reads a workload's revisions and the config each one's pods are given, for
// kubectl configwave: the ReplicaSets of a Deployment or an Argo Rollout, the
// ControllerRevisions of a StatefulSet or a DaemonSet, the Jobs of a CronJob, each with the
// snapshots its index names (or why its pods read the live objects). Reading is here; what a
// revision's outcome was is decided in Judge, a pure function of what was read.
package history

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/autorollback"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/rollout"
	"github.com/configwave/configwave/internal/wave/waveclient"
	"github.com/configwave/configwave/internal/wave/workload"
)

// Revision is one revision of a workload.
type Revision struct {
	Number int64
	// Object names what keeps the revision, as kubectl names it: "replicaset/web-6d5f7c9b8".
	Object string
	// Name is that object's name: its pods' controller (a ReplicaSet, a Job) or their
	// controller-revision-hash label (a ControllerRevision).
	Name    string
	Created time.Time
	// Earlier are the numbers the revision had before an undo brought it back (a ReplicaSet's
	// revision-history annotation): creation times alone cannot order two revisions made in
	// the same second.
	Earlier    []int64
	InputsHash string
	Template   corev1.PodTemplateSpec
	// Config is each ConfigMap and Secret the template names, and what its pods read for it.
	Config []Source
	// Gone says why the revision's snapshots cannot be given to its pods any more ("" while
	// they can): its pods, and an undo to it, read the live objects.
	Gone string
	// Outcome and Cause are Judge's.
	Outcome string
	Cause   string
}

// Source is one ConfigMap or Secret of a revision.
type Source struct {
	Ref configref.Ref
	// Snapshot is the immutable copy the revision's pods read; "" when they read Ref itself.
	Snapshot string
	// Content identifies the content the revision was made with (the snapshot name's suffix);
	// "" when it keeps none. Set beside Live when the snapshot is gone.
	Content string
	// Live says why the pods read the live object ("" when they read Snapshot).
	Live string
}

// What names the source as kubectl does: "configmap/app".
func (s Source) What() string { return s.Ref.Kind.Lower() + "/" + s.Ref.Name }

// Reader reads through the user's own credentials.
type Reader struct {
	Kube    waveclient.Interface
	Dynamic dynamic.Interface // nil where Argo Rollouts is not served
	// Metadata reads the sources' metadata only, for who wrote them (nil: not said).
	Metadata metadata.Interface
}

// Workload reads the workload kind/name in namespace.
func (r Reader) Workload(ctx context.Context, namespace string, kind workload.Kind, name string) (workload.Workload, error) {
	t, err := workload.TypeOf(kind)
	if err != nil {
		return workload.Workload{}, err
	}
	return t.Get(ctx, workload.Clients{Kube: r.Kube, Dynamic: r.Dynamic}, namespace, name)
}

// revisionAnnotations are where a ReplicaSet keeps its revision number.
var revisionAnnotations = map[workload.Kind]string{
	workload.Deployment:  "deployment.kubernetes.io/revision",
	workload.ArgoRollout: "rollout.argoproj.io/revision",
}

// historyAnnotations are where a ReplicaSet brought back by an undo keeps its former numbers.
var historyAnnotations = map[workload.Kind]string{
	workload.Deployment:  "deployment.kubernetes.io/revision-history",
	workload.ArgoRollout: "rollout.argoproj.io/revision-history",
}

// earlier reads a revision-history annotation, "2,4": numbers that do not parse are left out.
func earlier(s string) []int64 {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// Revisions reads w's revisions, oldest number first, each with its config.
func (r Reader) Revisions(ctx context.Context, w workload.Workload) ([]Revision, error) {
	var revs []Revision
	var err error
	switch w.Kind {
	case workload.Deployment, workload.ArgoRollout:
		revs, err = r.replicaSets(ctx, w)
	case workload.StatefulSet, workload.DaemonSet:
		revs, err = r.controllerRevisions(ctx, w)
	case workload.CronJob:
		revs, err = r.jobs(ctx, w)
	default:
		return nil, fmt.Errorf("%s: kind %s has no revisions configwave reads", w, w.Kind)
	}
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(revs, func(a, b Revision) int { return cmp.Compare(a.Number, b.Number) })
	for i := range revs {
		if err := r.config(ctx, w.Meta.Namespace, &revs[i]); err != nil {
			return nil, err
		}
	}
	return revs, nil
}

func controlledBy(obj metav1.Object, w workload.Workload) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == w.Meta.UID && ref.Kind == string(w.Kind)
}

func selectorOf(w workload.Workload) (string, error) {
	sel, err := metav1.LabelSelectorAsSelector(w.Selector)
	if err != nil {
		return "", fmt.Errorf("%s: its selector: %w", w, err)
	}
	return sel.String(), nil
}

func (r Reader) replicaSets(ctx context.Context, w workload.Workload) ([]Revision, error) {
	sel, err := selectorOf(w)
	if err != nil {
		return nil, err
	}
	list, err := r.Kube.AppsV1().ReplicaSets(w.Meta.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("%s: list its ReplicaSets: %w", w, err)
	}
	var revs []Revision
	for _, rs := range list.Items {
		if !controlledBy(&rs, w) {
			continue
		}
		n, err := strconv.ParseInt(rs.Annotations[revisionAnnotations[w.Kind]], 10, 64)
		if err != nil {
			continue // not (yet) numbered by its controller
		}
		revs = append(revs, Revision{Number: n, Object: "replicaset/" + rs.Name, Name: rs.Name, Created: rs.CreationTimestamp.Time, Earlier: earlier(rs.Annotations[historyAnnotations[w.Kind]]),
			InputsHash: rs.Spec.Template.Annotations[rollout.InputsHashAnnotation], Template: rs.Spec.Template})
	}
	return revs, nil
}

func (r Reader) controllerRevisions(ctx context.Context, w workload.Workload) ([]Revision, error) {
	sel, err := selectorOf(w)
	if err != nil {
		return nil, err
	}
	list, err := r.Kube.AppsV1().ControllerRevisions(w.Meta.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("%s: list its ControllerRevisions: %w", w, err)
	}
	var revs []Revision
	for i := range list.Items {
		cr := &list.Items[i]
		if !controlledBy(cr, w) {
			continue
		}
		t, err := autorollback.RevisionTemplate(cr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w, err)
		}
		revs = append(revs, Revision{Number: cr.Revision, Object: "controllerrevision/" + cr.Name, Name: cr.Name, Created: cr.CreationTimestamp.Time,
			InputsHash: t.Annotations[rollout.InputsHashAnnotation], Template: t})
	}
	return revs, nil
}

// jobs are a CronJob's revisions: each Job it started runs the template it had then. They are
// numbered by when they started among the Jobs still there, as a CronJob keeps no number of
// its own: a number can move once its history limits delete old Jobs.
func (r Reader) jobs(ctx context.Context, w workload.Workload) ([]Revision, error) {
	list, err := r.Kube.BatchV1().Jobs(w.Meta.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: list its Jobs: %w", w, err)
	}
	var jobs []Revision
	current := map[string]bool{} // Jobs of the CronJob's template now
	for i := range list.Items {
		if j := &list.Items[i]; controlledBy(j, w) {
			t := JobTemplate(j)
			jobs = append(jobs, Revision{Object: "job/" + j.Name, Name: j.Name, Created: j.CreationTimestamp.Time,
				InputsHash: t.Annotations[rollout.InputsHashAnnotation], Template: t})
			current[j.Name] = w.Template != nil && equality.Semantic.DeepEqual(t, *w.Template)
		}
	}
	// By creation, kept to the second; within one (a change right after another, each
	// starting a Job), the run of the CronJob's template now is the newer.
	slices.SortStableFunc(jobs, func(a, b Revision) int {
		return cmp.Or(a.Created.Compare(b.Created), compareBool(current[a.Name], current[b.Name]), strings.Compare(a.Name, b.Name))
	})
	// Runs of the same template are one revision, named by its newest Job (the one most likely
	// still there when an undo reads it).
	var revs []Revision
	for _, j := range jobs {
		if n := len(revs); n > 0 && equality.Semantic.DeepEqual(revs[n-1].Template, j.Template) {
			created := revs[n-1].Created
			revs[n-1] = j
			revs[n-1].Created = created
			continue
		}
		revs = append(revs, j)
	}
	for i := range revs {
		revs[i].Number = int64(i + 1)
	}
	return revs, nil
}

// jobControllerLabels are the labels the Job controller adds to a Job's pod template; a
// CronJob's own template has none of them.
var jobControllerLabels = []string{"controller-uid", "job-name", batchv1.ControllerUidLabel, batchv1.JobNameLabel}

// JobTemplate is the pod template a CronJob had when it made job: the Job's, without the
// labels the Job controller added.
func JobTemplate(job *batchv1.Job) corev1.PodTemplateSpec {
	t := *job.Spec.Template.DeepCopy()
	for _, l := range jobControllerLabels {
		delete(t.Labels, l)
	}
	if len(t.Labels) == 0 {
		t.Labels = nil
	}
	return t
}

// config fills rev.Config: the snapshots its index names, or why its pods read live.
func (r Reader) config(ctx context.Context, namespace string, rev *Revision) error {
	var snaps revisions.Snapshots
	live := "revisions were off for this revision"
	if revisions.IsRevision(rev.InputsHash) {
		var err error
		snaps, err = revisions.Kept(ctx, revisions.ClientAPI{Core: r.Kube.CoreV1()}, namespace, rev.InputsHash, &rev.Template)
		switch {
		case errors.Is(err, revisions.ErrConfigGone):
			rev.Gone = err.Error()
			live = "its snapshots are gone: " + err.Error()
		case err != nil:
			return fmt.Errorf("revision %d (%s): %w", rev.Number, rev.Object, err)
		default:
			live = "not kept in snapshots (it opts out, or is a token Secret)"
		}
	}
	rev.Config = nil
	for _, ref := range revisions.SourcesOf(namespace, &rev.Template.Spec) {
		snap, ok := snaps[ref]
		switch {
		case ok && rev.Gone != "": // what it was made of, which its pods no longer get
			rev.Config = append(rev.Config, Source{Ref: ref, Content: revisions.SnapshotContent(snap), Live: live})
		case ok:
			rev.Config = append(rev.Config, Source{Ref: ref, Snapshot: snap, Content: revisions.SnapshotContent(snap)})
		default:
			rev.Config = append(rev.Config, Source{Ref: ref, Live: live})
		}
	}
	return nil
}

// Writers reads, for each ConfigMap and Secret the revisions name, who wrote it last, from
// its managedFields (State.Writers). Only the metadata is asked for, so no Secret's value
// reaches the plugin; a source the user may not read, or that is gone, names no one.
func (r Reader) Writers(ctx context.Context, namespace string, revs []Revision) map[string][]Write {
	if r.Metadata == nil {
		return nil
	}
	out := map[string][]Write{}
	for _, rev := range revs {
		for _, s := range rev.Config {
			if _, done := out[s.What()]; done {
				continue
			}
			gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
			if s.Ref.Kind == configref.Secret {
				gvr.Resource = "secrets"
			}
			m, err := r.Metadata.Resource(gvr).Namespace(namespace).Get(ctx, s.Ref.Name, metav1.GetOptions{})
			if err != nil {
				out[s.What()] = nil
				continue
			}
			out[s.What()] = writesOf(m.ManagedFields)
		}
	}
	return out
}

// writesOf keeps the writes of each manager that owns some of the object's data (data,
// binaryData, a Secret's stringData): a manager that only labelled or annotated it (kubectl
// label, a GitOps tool's tracking) changed nothing a revision keeps. The fields are key names,
// never values.
func writesOf(fields []metav1.ManagedFieldsEntry) []Write {
	var out []Write
	for _, f := range fields {
		if f.Subresource != "" || f.Time == nil || f.Manager == "" || f.FieldsV1 == nil {
			continue
		}
		raw := f.FieldsV1.GetRawString()
		if strings.Contains(raw, `"f:data"`) || strings.Contains(raw, `"f:binaryData"`) || strings.Contains(raw, `"f:stringData"`) {
			out = append(out, Write{Manager: f.Manager, At: f.Time.Time})
		}
	}
	return out
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}
