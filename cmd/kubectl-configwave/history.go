package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/configwave/configwave/internal/plugin/configdiff"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
)

func newHistory(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "history KIND/NAME",
		Short: "One row per revision: the config it runs, its outcome and what started it",
		Example: `  kubectl configwave history deploy/web -n shop
  kubectl configwave history sts/db -o yaml`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeWorkloads(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.open(cmd.Context(), args)
			if err != nil {
				return err
			}
			return printHistory(cmd.OutOrStdout(), output, s)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, json or yaml.")
	return cmd
}

// historyView is history's -o json and -o yaml: names and content ids, never a value.
type historyView struct {
	Workload  string         `json:"workload"`
	Namespace string         `json:"namespace"`
	Revisions []revisionView `json:"revisions"`
	// Note says what a user can do when the workload keeps no config in its revisions.
	Note string `json:"note,omitempty"`
	// Pending is the config change that waits for approval (configwave.io/approval: manual).
	Pending *pendingView `json:"pending,omitempty"`
	// DeferredUntil: a config change waits for the rollout window, which opens then.
	DeferredUntil *time.Time `json:"deferredUntil,omitempty"`
}

type pendingView struct {
	Change string    `json:"change"`
	ID     string    `json:"id"`
	Since  time.Time `json:"since"`
}

type revisionView struct {
	Revision   int64        `json:"revision"`
	Object     string       `json:"object"`
	Created    time.Time    `json:"created"`
	InputsHash string       `json:"inputsHash,omitempty"`
	Config     []sourceView `json:"config"`
	Outcome    string       `json:"outcome"`
	Cause      string       `json:"cause"`
}

type sourceView struct {
	Source   string `json:"source"`
	Snapshot string `json:"snapshot,omitempty"`
	Content  string `json:"content,omitempty"`
	Live     string `json:"live,omitempty"`
}

func viewOf(s *session) historyView {
	v := historyView{Workload: s.target.String(), Namespace: s.namespace, Revisions: []revisionView{}}
	kept := false
	for _, r := range s.revisions {
		rv := revisionView{Revision: r.Number, Object: r.Object, Created: r.Created.UTC(), Outcome: r.Outcome, Cause: r.Cause, Config: []sourceView{}}
		if revisions.IsRevision(r.InputsHash) {
			// A revision's name. Any other inputs hash may be made from unkeyed digests of
			// Secret values, which would let a reader test guesses of them: not shown.
			rv.InputsHash = r.InputsHash
		}
		for _, src := range r.Config {
			rv.Config = append(rv.Config, sourceView{Source: src.What(), Snapshot: src.Snapshot, Content: src.Content, Live: src.Live})
		}
		kept = kept || revisions.IsRevision(r.InputsHash)
		v.Revisions = append(v.Revisions, rv)
	}
	if rec, err := rolloutrecord.ParseRecord(s.workload.Meta.Annotations[rolloutrecord.Annotation]); err == nil {
		if rec.PendingID != "" {
			v.Pending = &pendingView{Change: rec.Pending, ID: rec.PendingID, Since: rec.PendingSince}
		}
		if !rec.DeferredUntil.IsZero() {
			v.DeferredUntil = &rec.DeferredUntil
		}
	}
	if !kept {
		v.Note = fmt.Sprintf("%s keeps no config in its revisions, so an undo brings back its template on today's config. "+
			"With wave running, turn revisions on: kubectl annotate %s -n %s %s=true (or wave's --config-revisions for every workload)",
			s.target, s.target, s.namespace, revisions.OptInAnnotation)
	}
	return v
}

func printHistory(w io.Writer, output string, s *session) error {
	v := viewOf(s)
	if done, err := printStructured(w, output, v); done {
		return err
	}
	c := coloursFor(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "REVISION\tAGE\tOBJECT\tCONFIG\tOUTCOME\tCAUSE\n")
	for _, r := range v.Revisions {
		// Outcomes quote other controllers' status messages: shown, never obeyed by the terminal.
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.Revision, age(r.Created), r.Object, configCell(r.Config), c.outcome(configdiff.Clean(r.Outcome)), configdiff.Clean(r.Cause))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if v.Pending != nil {
		fmt.Fprintf(w, "\n%s: the change of %s (%s) waits for approval since %s ago: see it with kubectl configwave diff %s -n %s --live, then approve or reject it\n",
			c.paint("33", "waiting for approval"), configdiff.Clean(v.Pending.Change), configdiff.Clean(v.Pending.ID), age(v.Pending.Since), v.Workload, v.Namespace)
	}
	if v.DeferredUntil != nil {
		fmt.Fprintf(w, "\n%s: a config change rolls when the rollout window opens, at %s; kubectl configwave rollout-now %s -n %s rolls it now\n",
			c.paint("33", "waiting for its window"), v.DeferredUntil.Format(time.RFC3339), v.Workload, v.Namespace)
	}
	if v.Note != "" {
		_, err := fmt.Fprintf(w, "\n%s\n", v.Note)
		return err
	}
	return nil
}

// configCell is a revision's config in one cell: "configmap/app@app-1234567890, secret/db (live)".
func configCell(srcs []sourceView) string {
	if len(srcs) == 0 {
		return "(none)"
	}
	parts := make([]string, len(srcs))
	for i, s := range srcs {
		if s.Snapshot != "" {
			parts[i] = s.Source + "@" + s.Content
		} else {
			parts[i] = s.Source + " (live)"
		}
	}
	return strings.Join(parts, ", ")
}

func age(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	d := time.Since(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
