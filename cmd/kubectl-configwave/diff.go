package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/plugin/configdiff"
	"github.com/configwave/configwave/internal/plugin/history"
)

func newDiff(g *globals) *cobra.Command {
	var from, to int64
	cmd := &cobra.Command{
		Use:   "diff KIND/NAME [--revision=N] [--to=M]",
		Short: "What changed in the config between two revisions (a Secret's keys and sizes only)",
		Long: `diff shows, for each ConfigMap two revisions read, a unified diff of each changed key; for
each Secret only which keys were added, removed or changed, and their sizes, never a value.
By default it compares the newest revision with the one before it.`,
		Example: `  kubectl configwave diff deploy/web
  kubectl configwave diff deploy/web --revision=3 --to=5`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeWorkloads(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.open(cmd.Context(), args)
			if err != nil {
				return err
			}
			if len(s.revisions) == 0 {
				return fmt.Errorf("%s in namespace %s has no revisions yet", s.target, s.namespace)
			}
			b := &s.revisions[len(s.revisions)-1]
			if to != 0 {
				if b, err = s.revision(to); err != nil {
					return err
				}
			}
			var a *history.Revision
			switch {
			case from != 0:
				if a, err = s.revision(from); err != nil {
					return err
				}
			default:
				i := slices.IndexFunc(s.revisions, func(r history.Revision) bool { return r.Number == b.Number })
				if i == 0 {
					return fmt.Errorf("%s in namespace %s: revision %d is its first; name another with --revision", s.target, s.namespace, b.Number)
				}
				a = &s.revisions[i-1]
			}
			return writeDiff(cmd.Context(), cmd.OutOrStdout(), s, a, b)
		},
	}
	cmd.Flags().Int64Var(&from, "revision", 0, "the revision to compare from (default: the one before --to).")
	cmd.Flags().Int64Var(&to, "to", 0, "the revision to compare to (default: the newest).")
	return cmd
}

func writeDiff(ctx context.Context, w io.Writer, s *session, a, b *history.Revision) error {
	var refs []configref.Ref
	for _, r := range []*history.Revision{a, b} {
		for _, src := range r.Config {
			if !slices.Contains(refs, src.Ref) {
				refs = append(refs, src.Ref)
			}
		}
	}
	slices.SortFunc(refs, configref.Compare)
	any := false
	for _, ref := range refs {
		ca, err := contentOf(ctx, s, a, ref)
		if err != nil {
			return err
		}
		cb, err := contentOf(ctx, s, b, ref)
		if err != nil {
			return err
		}
		changed, err := configdiff.Write(w, ca, cb)
		if err != nil {
			return err
		}
		any = any || changed
	}
	if !any {
		_, err := fmt.Fprintf(w, "revisions %d and %d of %s read the same config\n", a.Number, b.Number, s.target)
		return err
	}
	return nil
}

// contentOf reads what rev's pods read for ref: its snapshot, or the live object (today's
// content: what the revision's pods read when it was current is not kept then).
func contentOf(ctx context.Context, s *session, rev *history.Revision, ref configref.Ref) (configdiff.Content, error) {
	c := configdiff.Content{What: ref.Kind.Lower() + "/" + ref.Name, Secret: ref.Kind == configref.Secret}
	i := slices.IndexFunc(rev.Config, func(src history.Source) bool { return src.Ref == ref })
	if i < 0 {
		c.Where, c.Missing = fmt.Sprintf("revision %d", rev.Number), true
		return c, nil
	}
	name := rev.Config[i].Snapshot
	c.Where = fmt.Sprintf("revision %d, snapshot %s", rev.Number, name)
	if name == "" {
		name = ref.Name
		c.Where = fmt.Sprintf("revision %d, live now", rev.Number)
	}
	doing := fmt.Sprintf("read %s %s in namespace %s for revision %d of %s", ref.Kind.Lower(), name, s.namespace, rev.Number, s.target)
	switch ref.Kind {
	case configref.ConfigMap:
		cm, err := s.reader.Kube.CoreV1().ConfigMaps(s.namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			c.Where, c.Missing = c.Where+" (not found)", true
			return c, nil
		} else if err != nil {
			return c, explain(err, doing)
		}
		c.Data, c.Binary = map[string][]byte{}, map[string]bool{}
		for k, v := range cm.Data {
			c.Data[k] = []byte(v)
		}
		for k, v := range cm.BinaryData {
			c.Data[k], c.Binary[k] = v, true
		}
	case configref.Secret:
		sec, err := s.reader.Kube.CoreV1().Secrets(s.namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			c.Where, c.Missing = c.Where+" (not found)", true
			return c, nil
		} else if err != nil {
			return c, explain(err, doing)
		}
		c.Data, c.Type = sec.Data, string(sec.Type)
	}
	return c, nil
}
