package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	flag "github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/configwave/configwave/internal/kube/kubeclient"
	"github.com/configwave/configwave/internal/process/startup"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/rollout"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/workload"
)

// statusOptions are the flags of `wave status`.
type statusOptions struct {
	namespaces      string
	labelSelector   string
	annotations     string
	stakater        stakaterFlags // Stakater Reloader's flags, as wave takes them: names, --auto-reload-all, CSI
	output          string
	rolloutDeadline time.Duration
	kubeconfig      string
	version         bool
}

func newStatusFlagSet(o *statusOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("wave status", flag.ContinueOnError)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `wave status lists the workloads that opted in to wave (in Wave's or Stakater Reloader's
annotations), the ConfigMaps and Secrets each one uses, and whether its pods run the
current config: up to date, rolling, failed, or waiting for missing config, and since when;
"held by a rollback" when, with config revisions, an undo put it back at an earlier config;
"not recorded" when wave has not looked at it yet, "filtered out" when the filters given here
(as wave's) leave it out.
It reads the records wave writes on the workloads, so it needs read access to Deployments,
StatefulSets, DaemonSets, CronJobs and Argo Rollouts only.

Usage: wave status [flags]

Flags:
%s`, fs.FlagUsages())
	}
	fs.StringVarP(&o.namespaces, "namespaces", "n", "", "comma-separated namespaces; empty lists all.")
	fs.StringVarP(&o.output, "output", "o", "table", `"table" or "json".`)
	fs.StringVar(&o.labelSelector, "label-selector", "", "as wave's flag: a workload whose labels do not match shows as filtered out.")
	fs.StringVar(&o.annotations, "annotations", "wave,stakater", "as wave's flag: a workload that opts in only in a dialect not read shows as filtered out.")
	o.stakater.add(fs) // read as wave reads them, so that status lists what wave manages
	fs.DurationVar(&o.rolloutDeadline, "rollout-deadline", 10*time.Minute, "as wave's flag: a StatefulSet or DaemonSet rollout older than this that is not complete shows as failed.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; default $KUBECONFIG, ~/.kube/config, else the pod's service account.")
	fs.BoolVar(&o.version, "version", false, "print the version and exit.")
	return fs
}

// WorkloadStatus is one row of `wave status`, and one element of its JSON.
type WorkloadStatus struct {
	Namespace string        `json:"namespace"`
	Kind      workload.Kind `json:"kind"`
	Name      string        `json:"name"`
	Config    []string      `json:"config"` // "configmap/NAME", "secret/NAME", "configmap/NS/NAME"
	rolloutrecord.Verdict
}

func runStatus(args []string, stdout io.Writer) int {
	var o statusOptions
	fs := newStatusFlagSet(&o)
	if code, stop := startup.Parse("wave status", fs, args, &o.version, version); stop {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "wave status: unexpected argument %q; it takes flags only\n", fs.Arg(0))
		return 2
	}
	namespaces, err := parseNamespaces(o.namespaces)
	if err != nil {
		fmt.Fprintf(os.Stderr, "wave status: %v\n", err)
		return 2
	}
	if o.output != "table" && o.output != "json" {
		fmt.Fprintf(os.Stderr, "wave status: --output=%q: use table or json\n", o.output)
		return 2
	}
	filter, err := o.filter()
	if err != nil {
		fmt.Fprintf(os.Stderr, "wave status: %v\n", err)
		return 2
	}
	restCfg, err := kubeclient.Config(o.kubeconfig, "configwave-wave-status/"+startup.Version(version), 50, 100)
	if err != nil {
		fmt.Fprintf(os.Stderr, "wave status: %v\n", err)
		return 1
	}
	clients, kinds, err := workload.Connect(restCfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "wave status: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rows, err := collectStatus(ctx, clients, kinds, namespaces, time.Now(), o.rolloutDeadline, filter)
	if err != nil {
		fmt.Fprintf(os.Stderr, "wave status: %v\n", err)
		return 1
	}
	if o.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			return 1
		}
		return 0
	}
	printStatusTable(stdout, rows, time.Now())
	return 0
}

// collectStatus lists every opted-in workload of every kind, a page at a time.
func collectStatus(ctx context.Context, clients workload.Clients, kinds []workload.Type, namespaces []string, now time.Time, deadline time.Duration, filter statusFilter) ([]WorkloadStatus, error) {
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	rows := []WorkloadStatus{}
	for _, ns := range namespaces {
		for _, t := range kinds {
			opts := metav1.ListOptions{Limit: 500}
			for {
				ws, next, err := t.List(ctx, clients, ns, opts)
				if err != nil {
					where := "in every namespace"
					if ns != "" {
						where = "in namespace " + ns
					}
					return nil, fmt.Errorf("list %ss %s: %w (wave status needs list access to them)", strings.ToLower(string(t.Kind())), where, err)
				}
				for _, w := range ws {
					if wave, stakater := rollout.Select(rollout.Dialects{}, filter.stakater, w); wave || stakater != nil {
						rows = append(rows, statusOf(w, now, deadline, filter))
					}
				}
				if next == "" {
					break
				}
				opts.Continue = next
			}
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	return rows, nil
}

// statusFilter is what of wave's filters wave status was told, to tell a workload wave leaves
// out from one it has not looked at yet.
type statusFilter struct {
	labels   labels.Selector // nil: every workload
	dialects rollout.Dialects
	stakater podrefs.StakaterDialect // with wave's names, --auto-reload-all and CSI
	ignoreNS map[string]bool
}

func (o *statusOptions) filter() (statusFilter, error) {
	f := statusFilter{ignoreNS: map[string]bool{}}
	if o.labelSelector != "" {
		sel, err := labels.Parse(o.labelSelector)
		if err != nil {
			return f, fmt.Errorf("--label-selector=%q: %w", o.labelSelector, err)
		}
		f.labels = sel
	}
	d, err := rollout.ParseDialects(o.annotations)
	if err != nil {
		return f, err
	}
	f.dialects = d
	var ro rollout.StakaterOptions
	if err := o.stakater.check(&ro); err != nil {
		return f, err
	}
	if ro.Dialect.SecretProviderClasses, err = o.stakater.csiIntegration(); err != nil {
		return f, err
	}
	f.stakater, f.ignoreNS = ro.Dialect, ro.Namespaces
	return f, nil
}

// filteredOut says why wave's filters leave w out, or "".
func (f statusFilter) filteredOut(w workload.Workload) string {
	switch {
	case f.ignoreNS[w.Meta.Namespace]:
		return "its namespace is in --namespaces-to-ignore"
	case f.labels != nil && !f.labels.Matches(labels.Set(w.Meta.Labels)):
		return fmt.Sprintf("its labels do not match --label-selector=%s", f.labels)
	}
	if wave, stakater := rollout.Select(f.dialects, f.stakater, w); !wave && stakater == nil {
		return fmt.Sprintf("it opts in only in a dialect that --annotations=%s does not read", dialectNames(f.dialects))
	}
	return ""
}

func dialectNames(d rollout.Dialects) string {
	var out []string
	if d.Wave {
		out = append(out, "wave")
	}
	if d.Stakater {
		out = append(out, "stakater")
	}
	return strings.Join(out, ",")
}

func statusOf(w workload.Workload, now time.Time, deadline time.Duration, filter statusFilter) WorkloadStatus {
	row := WorkloadStatus{Namespace: w.Meta.Namespace, Kind: w.Kind, Name: w.Meta.Name, Config: []string{}}
	used := podrefs.Extract(w.Meta.Namespace, w.Meta.Annotations, &w.Template.Spec)
	for _, r := range used.All() {
		row.Config = append(row.Config, r.Short(w.Meta.Namespace))
	}
	slices.Sort(row.Config)
	if why := filter.filteredOut(w); why != "" {
		row.Verdict = rolloutrecord.Verdict{State: rolloutrecord.FilteredOut, Reason: why}
		return row
	}
	if _, recorded := w.Meta.Annotations[rollout.InputsAnnotation]; !recorded {
		row.Verdict = rolloutrecord.Verdict{State: rolloutrecord.NotRecorded,
			Reason: "wave has not looked at it: check that wave runs and watches namespace " + w.Meta.Namespace + " (its --namespaces, --namespace-selector)"}
		return row
	}
	rec, err := rolloutrecord.ParseRecord(w.Meta.Annotations[rolloutrecord.Annotation])
	if err != nil {
		row.Verdict = rolloutrecord.Verdict{State: "unknown", Reason: err.Error()}
		return row
	}
	rec = rec.AtTemplate(w.Template.Annotations[rollout.InputsHashAnnotation])
	row.Verdict = rolloutrecord.Evaluate(rec, w.Progress, now, deadline)
	// With config revisions, the label names the newest revision wave rolled: a template at
	// another one was undone (kubectl rollout undo, an abort), and wave holds it there.
	at := w.Template.Annotations[rollout.InputsHashAnnotation]
	if newest := w.Meta.Labels[revisions.RevisionLabel]; newest != "" && at != newest && row.State != rolloutrecord.Rolling {
		if at == "" {
			at = "one from before wave rolled it"
		}
		row.Verdict = rolloutrecord.Verdict{State: rolloutrecord.HeldBack,
			Reason: "its template is at revision " + at + ", not the newest (" + newest + "); the next change of its config rolls it forward"}
	}
	if rec.DeferredUntil.After(now) && row.State != rolloutrecord.Failed && row.State != rolloutrecord.Waiting {
		row.Verdict = rolloutrecord.Verdict{State: rolloutrecord.Deferred,
			Reason: "outside its rollout window; rolls when it opens, at " + rec.DeferredUntil.Format(time.RFC3339) + " (configwave.io/rollout-now: \"true\" rolls it now)"}
	}
	if rec.Incomplete != "" && row.State != rolloutrecord.Failed && row.State != rolloutrecord.Waiting {
		row.Verdict = rolloutrecord.Verdict{State: rolloutrecord.Incomplete, Since: rec.IncompleteSince,
			Reason: rec.Incomplete + "; rolls once it is complete, or after --source-ready-timeout (configwave.io/rollout-now: \"true\" rolls it now)"}
	}
	if rec.PendingID != "" && row.State != rolloutrecord.Failed && row.State != rolloutrecord.Waiting {
		row.Verdict = rolloutrecord.Verdict{State: rolloutrecord.PendingApproval, Since: rec.PendingSince, Change: rec.Pending,
			Reason: rec.Pending + " changed, and configwave.io/approval is manual: approve with kubectl configwave approve " + strings.ToLower(string(w.Kind)) + "/" + w.Meta.Name + " -n " + w.Meta.Namespace + ", or reject"}
	}
	return row
}

func printStatusTable(out io.Writer, rows []WorkloadStatus, now time.Time) {
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tKIND\tNAME\tSTATE\tSINCE\tCONFIG\tDETAIL")
	for _, r := range rows {
		since := "-"
		if !r.Since.IsZero() {
			since = duration.HumanDuration(now.Sub(r.Since))
		}
		config := strings.Join(r.Config, ",")
		if config == "" {
			config = "-"
		}
		detail := r.Reason
		if detail == "" && r.Change != "" {
			detail = r.Change + " changed"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Namespace, r.Kind, r.Name, r.State, since, config, detail)
	}
	_ = tw.Flush()
}
