package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/plugin/configdiff"
	"github.com/configwave/configwave/internal/plugin/history"
)

func newDiff(g *globals) *cobra.Command {
	var from, to int64
	var live bool
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
			if live {
				if to != 0 {
					return fmt.Errorf("--live compares to the live objects: give --revision, not --to")
				}
				if from == 0 {
					from = b.Number
				}
				b = liveRevision(b)
			} else if to != 0 {
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
				if a = history.Replaced(s.revisions, b); a == nil {
					return fmt.Errorf("%s in namespace %s: revision %d is its first; name another with --revision", s.target, s.namespace, b.Number)
				}
			}
			return writeDiff(cmd.Context(), cmd.OutOrStdout(), s, a, b)
		},
	}
	cmd.Flags().Int64Var(&from, "revision", 0, "the revision to compare from (default: the one before --to).")
	cmd.Flags().Int64Var(&to, "to", 0, "the revision to compare to (default: the newest).")
	cmd.Flags().BoolVar(&live, "live", false, "compare to the live ConfigMaps and Secrets: what the next rollout, or a change that waits for approval, brings.")
	return cmd
}

// liveRevision is the config the next rollout of newest's template would bring: its sources,
// live.
func liveRevision(newest *history.Revision) *history.Revision {
	live := &history.Revision{Number: 0, Object: "live"}
	for _, src := range newest.Config {
		live.Config = append(live.Config, history.Source{Ref: src.Ref, Live: "live"})
	}
	return live
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
	any, unkept := false, false
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
		unkept = unkept || ca.Unkept || cb.Unkept
	}
	if unkept {
		// A revision that keeps no copy was compared as the live objects are today: what its
		// pods read then is not known, so no "same" can be said.
		_, err := fmt.Fprintf(w, "note: revision %s keeps no copy of its config (revisions off, or its snapshots gone): it was compared as the live objects are now\n", unkeptOf(a, b))
		return err
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
	switch {
	case name == "" && rev.Object == "live":
		name, c.Where = ref.Name, "live now"
	case name == "":
		name, c.Where, c.Unkept = ref.Name, fmt.Sprintf("revision %d: not kept, live now", rev.Number), true
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

// unkeptOf names the compared revisions that keep no copy: "3", "3 and 5".
func unkeptOf(a, b *history.Revision) string {
	var out []string
	for _, r := range []*history.Revision{a, b} {
		if r.Object == "live" {
			continue
		}
		for _, src := range r.Config {
			if src.Snapshot == "" {
				out = append(out, fmt.Sprint(r.Number))
				break
			}
		}
	}
	return strings.Join(out, " and ")
}
