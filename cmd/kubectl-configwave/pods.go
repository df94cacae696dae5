package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/plugin/configdiff"
	"github.com/configwave/configwave/internal/plugin/history"
	"github.com/configwave/configwave/internal/plugin/sidecarstate"
	"github.com/configwave/configwave/internal/reloader/onefirst"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/workload"
)

func newPods(g *globals) *cobra.Command {
	var output string
	var watch bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "pods KIND/NAME [-w]",
		Short: "Each pod, its revision, whether it is Ready, and the config it reads",
		Long: `pods shows the workload's pods as a tree under their revisions, as Argo Rollouts' plugin
shows a rollout: each pod's revision, Ready, restarts, and for each ConfigMap and Secret whether
it reads its revision's snapshot or the live object. With -w it redraws as the pods change.`,
		Example: `  kubectl configwave pods deploy/web -n shop
  kubectl configwave pods sts/db -w`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeWorkloads(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if interval <= 0 {
				return fmt.Errorf("--watch-interval=%s: give a duration above zero, such as 2s", interval)
			}
			ctx := cmd.Context()
			s, err := g.open(ctx, args)
			if err != nil {
				return err
			}
			var last []byte
			for {
				view, err := podsView(ctx, s)
				if err != nil {
					return err
				}
				var out bytes.Buffer
				if done, err := printStructured(&out, output, view); !done {
					printPodTree(&out, coloursFor(cmd.OutOrStdout()), view)
				} else if err != nil {
					return err
				}
				if !bytes.Equal(out.Bytes(), last) {
					if last != nil && output == "table" {
						fmt.Fprintln(cmd.OutOrStdout(), "---")
					}
					if _, err := cmd.OutOrStdout().Write(out.Bytes()); err != nil {
						return err
					}
					last = out.Bytes()
				}
				if !watch {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(interval):
				}
				if err := s.reload(ctx); err != nil {
					return err
				}
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, json or yaml.")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "keep watching, and show the pods again whenever they change.")
	cmd.Flags().DurationVar(&interval, "watch-interval", 2*time.Second, "with -w, how often to look again.")
	return cmd
}

type podsOut struct {
	Workload  string        `json:"workload"`
	Namespace string        `json:"namespace"`
	Revisions []podRevision `json:"revisions"`
}

type podRevision struct {
	Revision int64     `json:"revision"`
	Object   string    `json:"object"`
	Outcome  string    `json:"outcome"`
	Pods     []podView `json:"pods"`
}

type podView struct {
	Name     string       `json:"name"`
	Ready    bool         `json:"ready"`
	Phase    string       `json:"phase"`
	Restarts int32        `json:"restarts"`
	Config   []sourceRead `json:"config"`
	// Sidecar is where the pod stands in its reloader sidecars' one-first rollout, as their
	// Lease records it ("" without one).
	Sidecar string `json:"sidecar,omitempty"`
}

// sourceRead is what one pod reads for one source: "snapshot" (its revision's) or "live".
type sourceRead struct {
	Source string `json:"source"`
	Reads  string `json:"reads"`
	Object string `json:"object"`
}

func podsView(ctx context.Context, s *session) (podsOut, error) {
	out := podsOut{Workload: s.target.String(), Namespace: s.namespace, Revisions: []podRevision{}}
	sel, err := metav1.LabelSelectorAsSelector(s.workload.Selector)
	if err != nil {
		return out, fmt.Errorf("%s: its selector: %w", s.target, err)
	}
	opts := metav1.ListOptions{LabelSelector: sel.String()}
	if s.target.Kind == workload.CronJob {
		opts = metav1.ListOptions{} // a CronJob has no selector: its Jobs' pods are found by their Job
	}
	pods, err := s.reader.Kube.CoreV1().Pods(s.namespace).List(ctx, opts)
	if err != nil {
		return out, explain(err, fmt.Sprintf("list the pods of %s in namespace %s", s.target, s.namespace))
	}
	recs := oneFirstRecords(ctx, s)
	byRevision := map[int64][]podView{}
	for i := range pods.Items {
		p := &pods.Items[i]
		rev := revisionOfPod(s, p)
		if rev == nil {
			continue
		}
		v := viewOfPod(s.namespace, rev, p)
		v.Sidecar = sidecarstate.Of(recs, p.Name)
		byRevision[rev.Number] = append(byRevision[rev.Number], v)
	}
	for i := len(s.revisions) - 1; i >= 0; i-- {
		r := s.revisions[i]
		ps := byRevision[r.Number]
		if len(ps) == 0 && i != len(s.revisions)-1 {
			continue // an old revision without pods says nothing here; history lists it
		}
		slices.SortFunc(ps, func(a, b podView) int { return strings.Compare(a.Name, b.Name) })
		if ps == nil {
			ps = []podView{}
		}
		out.Revisions = append(out.Revisions, podRevision{Revision: r.Number, Object: r.Object, Outcome: r.Outcome, Pods: ps})
	}
	return out, nil
}

// oneFirstRecords reads the one-first records of the workload's reloader sidecars from their
// Leases. A user who may not list Leases sees the pods without them: the rest of the view does
// not need them.
func oneFirstRecords(ctx context.Context, s *session) []onefirst.Record {
	leases, err := s.reader.Kube.CoordinationV1().Leases(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: sidecarstate.Label})
	if err != nil {
		return nil
	}
	return sidecarstate.Records(leases.Items, s.target.Kind, s.target.Name)
}

// revisionOfPod is the revision p belongs to: its controller (a ReplicaSet, a Job), or its
// controller-revision-hash label under the set that controls it.
func revisionOfPod(s *session, p *corev1.Pod) *history.Revision {
	controller := metav1.GetControllerOfNoCopy(p)
	owner, ok := revisions.OwnerOf(p) // a DaemonSet's pods carry the hash only, the revision is NAME-HASH
	if controller == nil || !ok {
		return nil
	}
	if (s.target.Kind == workload.StatefulSet || s.target.Kind == workload.DaemonSet) && controller.UID != s.workload.Meta.UID {
		return nil
	}
	for i := range s.revisions {
		if r := &s.revisions[i]; owner.Name == r.Name {
			return r
		}
	}
	return nil
}

func viewOfPod(namespace string, rev *history.Revision, p *corev1.Pod) podView {
	v := podView{Name: p.Name, Phase: string(p.Status.Phase), Config: []sourceRead{}}
	for _, c := range p.Status.Conditions {
		v.Ready = v.Ready || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	}
	for _, cs := range p.Status.ContainerStatuses {
		v.Restarts += cs.RestartCount
	}
	reads := revisions.SourcesOf(namespace, &p.Spec)
	for _, src := range rev.Config {
		r := sourceRead{Source: src.What(), Reads: "live", Object: src.Ref.Name}
		switch snap := revisions.SnapshotName(src.Ref.Name, src.Content); {
		case src.Snapshot != "" && slices.Contains(reads, configref.Ref{Kind: src.Ref.Kind, Namespace: namespace, Name: src.Snapshot}):
			r.Reads, r.Object = "snapshot", src.Snapshot
		case src.Content != "" && slices.Contains(reads, configref.Ref{Kind: src.Ref.Kind, Namespace: namespace, Name: snap}):
			r.Reads, r.Object = "snapshot (deleted since the pod started)", snap // kubelet keeps what it mounted
		}
		v.Config = append(v.Config, r)
	}
	return v
}

func printPodTree(w io.Writer, c colours, v podsOut) {
	fmt.Fprintf(w, "%s (namespace %s)\n", v.Workload, v.Namespace)
	for i, r := range v.Revisions {
		branch, stem := "├──", "│  "
		if i == len(v.Revisions)-1 {
			branch, stem = "└──", "   "
		}
		fmt.Fprintf(w, "%s revision %d  %s  %s\n", branch, r.Revision, r.Object, c.outcome(configdiff.Clean(r.Outcome)))
		for j, p := range r.Pods {
			leaf := "├──"
			if j == len(r.Pods)-1 {
				leaf = "└──"
			}
			ready := c.paint("33", "not ready")
			if p.Ready {
				ready = c.paint("32", "ready")
			}
			var cfg []string
			for _, s := range p.Config {
				if strings.HasPrefix(s.Reads, "snapshot") {
					cfg = append(cfg, s.Source+"@"+revisions.SnapshotContent(s.Object))
				} else {
					cfg = append(cfg, s.Source+" (live)")
				}
			}
			fmt.Fprintf(w, "%s %s pod/%s  %s  %s  restarts %d  %s\n", stem, leaf, p.Name, configdiff.Clean(p.Phase), ready, p.Restarts, strings.Join(cfg, ", "))
			if p.Sidecar != "" {
				under := "│  "
				if j == len(r.Pods)-1 {
					under = "   "
				}
				fmt.Fprintf(w, "%s %s  sidecar: %s\n", stem, under, configdiff.Clean(p.Sidecar))
			}
		}
	}
}
