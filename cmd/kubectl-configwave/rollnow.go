package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/window"
)

// newRollNow asks wave to roll a change that waits for the workload's rollout window now, as
// configwave.io/rollout-now: "true" does (wave removes it with the rollout). RBAC: patch on the
// workload.
func newRollNow(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:               "rollout-now KIND/NAME",
		Short:             "Roll the config change that waits for the workload's rollout window now",
		Example:           "  kubectl configwave rollout-now deploy/web   # a revoked credential cannot wait for Saturday",
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeWorkloads(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, err := g.open(ctx, args)
			if err != nil {
				return err
			}
			rec, err := rolloutrecord.ParseRecord(s.workload.Meta.Annotations[rolloutrecord.Annotation])
			if err != nil {
				return fmt.Errorf("%s in namespace %s: %w", s.target, s.namespace, err)
			}
			// A change held by a brake on a flapping source is not on the record, so this asks
			// whatever waits; wave removes the annotation once nothing does.
			if err := s.annotate(ctx, window.NowAnnotation, "true", "ask for the rollout now of"); err != nil {
				return err
			}
			if rec.DeferredUntil.IsZero() {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: asked to roll now (%s): a change held by a brake rolls; with nothing waiting, wave removes the annotation\n", s.target, window.NowAnnotation)
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: asked to roll now (%s), not at its window's opening at %s\n", s.target, window.NowAnnotation, rec.DeferredUntil.Format("2006-01-02T15:04:05Z07:00"))
			return err
		},
	}
}
