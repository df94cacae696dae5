package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configwave/configwave/internal/plugin/history"
	"github.com/configwave/configwave/internal/plugin/undo"
	"github.com/configwave/configwave/internal/wave/autorollback"
	"github.com/configwave/configwave/internal/wave/workload"
)

// fieldManager names the plugin's writes in managedFields.
const fieldManager = "kubectl-configwave"

var rolloutResource = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

func newUndo(g *globals) *cobra.Command {
	var to int64
	var allowLive bool
	cmd := &cobra.Command{
		Use:   "undo KIND/NAME [--to-revision=N]",
		Short: "Undo to a revision, with the config it ran (refused when that config is gone)",
		Long: `undo puts the workload back to a revision as kubectl rollout undo does (kubectl argo rollouts
undo for a Rollout; a CronJob's next Jobs), and with config revisions its pods get the config
that revision ran: wave holds the workload there until a source it follows changes. It is
refused when the revision's snapshots are gone, since its pods would read today's config.`,
		Example: `  kubectl configwave undo deploy/web                  # to the revision before the newest
  kubectl configwave undo deploy/web --to-revision=3`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeWorkloads(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, err := g.open(ctx, args)
			if err != nil {
				return err
			}
			if len(s.revisions) < 2 && to == 0 {
				return fmt.Errorf("%s in namespace %s has no revision before its newest to undo to", s.target, s.namespace)
			}
			n := to
			if n == 0 {
				n = s.revisions[len(s.revisions)-2].Number
			}
			rev, err := s.revision(n)
			if err != nil {
				return err
			}
			if why := undo.Refusal(s.target.String(), s.workload.Template, s.revisions, rev, allowLive); why != "" {
				return fmt.Errorf("not undone: %s", why)
			}
			if err := applyUndo(ctx, s, rev); err != nil {
				if apierrors.IsConflict(err) || apierrors.IsInvalid(err) && strings.Contains(err.Error(), "resourceVersion") {
					err = fmt.Errorf("%s changed since it was read: %w", s.target, errChanged) // the patch's test of the resourceVersion read
				}
				return explain(err, fmt.Sprintf("undo %s in namespace %s to revision %d", s.target, s.namespace, n))
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s rolled back to revision %d (%s)\n", s.target, n, configCell(viewOfConfig(rev)))
			return err
		},
	}
	cmd.Flags().Int64Var(&to, "to-revision", 0, "the revision to go back to (default: the one before the newest).")
	cmd.Flags().BoolVar(&allowLive, "allow-live-config", false, "undo to a revision that keeps no config, whose pods then read today's config.")
	return cmd
}

func viewOfConfig(r *history.Revision) []sourceView {
	var out []sourceView
	for _, s := range r.Config {
		out = append(out, sourceView{Source: s.What(), Snapshot: s.Snapshot, Content: s.Content, Live: s.Live})
	}
	return out
}

// errChanged: the workload was written between the read the undo was decided on and the write.
var errChanged = errors.New("nothing was undone; look at kubectl configwave history again, and undo again if it still applies")

// applyUndo writes the undo, each with a precondition on what was read, so that a change made
// in between is not undone blindly: the user looks again.
func applyUndo(ctx context.Context, s *session, rev *history.Revision) error {
	ns, name := s.namespace, s.target.Name
	opts := metav1.PatchOptions{FieldManager: fieldManager}
	kube := s.reader.Kube
	// The undo was decided on the spec read before: read afresh, the spec must be that one (its
	// generation; a status write, which controllers make all the time, changes nothing of it),
	// and the write is tested against the resourceVersion read now.
	fresh, err := s.reader.Workload(ctx, ns, s.target.Kind, name)
	if err != nil {
		return err
	}
	if fresh.Meta.Generation != s.workload.Meta.Generation {
		return fmt.Errorf("%s changed since it was read (generation %d, now %d): %w", s.target, s.workload.Meta.Generation, fresh.Meta.Generation, errChanged)
	}
	rv := fresh.Meta.ResourceVersion
	switch s.target.Kind {
	case workload.Deployment:
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		switch {
		case d.Generation != s.workload.Meta.Generation:
			return fmt.Errorf("%s changed since it was read (generation %d, now %d): %w", s.target, s.workload.Meta.Generation, d.Generation, errChanged)
		case d.Spec.Paused:
			return fmt.Errorf("%s is paused, and an undo of a paused Deployment does not roll: resume it first (kubectl rollout resume %s -n %s), as kubectl rollout undo asks", s.target, s.target, ns)
		}
		rs, err := kube.AppsV1().ReplicaSets(ns).Get(ctx, rev.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		body, err := autorollback.UndoPatch(d, rs, nil)
		if err != nil {
			return err
		}
		_, err = kube.AppsV1().Deployments(ns).Patch(ctx, name, types.JSONPatchType, body, opts)
		return err
	case workload.StatefulSet, workload.DaemonSet:
		cr, err := kube.AppsV1().ControllerRevisions(ns).Get(ctx, rev.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		body, err := autorollback.RevisionPatch(rv, cr, nil)
		if err != nil {
			return err
		}
		if s.target.Kind == workload.StatefulSet {
			_, err = kube.AppsV1().StatefulSets(ns).Patch(ctx, name, types.StrategicMergePatchType, body, opts)
		} else {
			_, err = kube.AppsV1().DaemonSets(ns).Patch(ctx, name, types.StrategicMergePatchType, body, opts)
		}
		return err
	case workload.CronJob:
		job, err := kube.BatchV1().Jobs(ns).Get(ctx, rev.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		body, err := undo.CronJobPatch(rv, job)
		if err != nil {
			return err
		}
		_, err = kube.BatchV1().CronJobs(ns).Patch(ctx, name, types.JSONPatchType, body, opts)
		return err
	case workload.ArgoRollout:
		rs, err := kube.AppsV1().ReplicaSets(ns).Get(ctx, rev.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		body, err := undo.RolloutPatch(rv, rs)
		if err != nil {
			return err
		}
		_, err = s.reader.Dynamic.Resource(rolloutResource).Namespace(ns).Patch(ctx, name, types.JSONPatchType, body, opts)
		return err
	}
	return fmt.Errorf("%s: no undo for kind %s", s.target, s.target.Kind)
}
