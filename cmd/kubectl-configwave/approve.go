package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/configwave/configwave/internal/wave/approval"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/workload"
)

// newDecide makes approve and reject: each writes, on the workload, the ID of the change that
// waits, in the annotation wave reads; the ID binds it to that change, so a later change waits
// again. RBAC: patch on the workload, as for any rollout.
func newDecide(g *globals, verb, annotation, done string) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " KIND/NAME",
		Short: fmt.Sprintf("%s the config change that waits for approval (configwave.io/approval: manual)", map[string]string{"approve": "Roll", "reject": "Drop"}[verb]),
		Example: fmt.Sprintf(`  kubectl configwave history deploy/web     # shows the change that waits
  kubectl configwave diff deploy/web --live # and what it changes
  kubectl configwave %s deploy/web`, verb),
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
			if rec.PendingID == "" {
				return fmt.Errorf("no config change of %s in namespace %s waits for approval (%s is %q; wave records a change that waits once it sees one)",
					s.target, s.namespace, approval.Annotation, s.workload.Meta.Annotations[approval.Annotation])
			}
			// The ID binds the approval to the change read: wave takes it for that change only,
			// and removes it once the workload stands at another.
			if err := s.annotate(ctx, annotation, rec.PendingID, verb+" the change of"); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: the change of %s (%s) %s\n", s.target, rec.Pending, rec.PendingID, done)
			return err
		},
	}
}

// annotate writes one annotation on the session's workload, as a merge patch without a
// resourceVersion precondition: controllers write the workload's status all the time, and what
// the annotation names binds it to what was read. doing says what for, in an error.
func (s *session) annotate(ctx context.Context, key, value, doing string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if err != nil {
		return err
	}
	clients := workload.Clients{Kube: s.reader.Kube, Dynamic: s.reader.Dynamic}
	if err := workload.Patch(ctx, clients, s.target.Kind, s.namespace, s.target.Name, body); err != nil {
		return explain(err, fmt.Sprintf("%s %s in namespace %s", doing, s.target, s.namespace))
	}
	return nil
}
