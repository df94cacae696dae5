package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/wave/access"
	"github.com/configwave/configwave/internal/wave/rollout"
	"github.com/configwave/configwave/internal/wave/waveclient"
	"github.com/configwave/configwave/internal/wave/workload"
)

// kindAccess is how wave follows each workload kind in each namespace it watches, decided at
// start by what its RBAC lets it do there (workload.AccessOf): a peer's chart may grant list
// without watch (Stakater Reloader's) or nothing on a kind (Wave's, on CronJobs).
type kindAccess struct {
	modes     map[workload.Kind]map[string]workload.Access // by kind, then namespace
	resources map[workload.Kind]string                     // each kind's API resource, as RBAC names it
}

// checkKindAccess asks the API server, once per kind and namespace.
func checkKindAccess(ctx context.Context, client waveclient.Interface, kinds []workload.Type, namespaces []string) (kindAccess, error) {
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	out := kindAccess{modes: map[workload.Kind]map[string]workload.Access{}, resources: map[workload.Kind]string{}}
	for _, t := range kinds {
		gr := t.GroupResource()
		out.resources[t.Kind()] = gr.String()
		out.modes[t.Kind()] = map[string]workload.Access{}
		for _, ns := range namespaces {
			may := map[string]bool{}
			for _, verb := range []string{"list", "watch"} {
				ok, err := access.Allowed(ctx, client, access.Check{Verb: verb, Group: gr.Group, Resource: gr.Resource, Namespace: ns})
				if err != nil {
					return kindAccess{}, err
				}
				may[verb] = ok
			}
			out.modes[t.Kind()][ns] = workload.AccessOf(may["list"], may["watch"])
		}
	}
	return out, nil
}

// Func is the answer as the informers ask it.
func (a kindAccess) Func() rollout.AccessFunc {
	return func(kind workload.Kind, namespace string) workload.Access {
		if m, ok := a.modes[kind][namespace]; ok {
			return m
		}
		return workload.Watched
	}
}

// notes are the lines to log at start, one per kind and namespace not simply watched, in a
// stable order; each says what to grant.
func (a kindAccess) notes() []string {
	var out []string
	for kind, byNS := range a.modes {
		for ns, m := range byNS {
			where := "in every namespace"
			if ns != "" {
				where = "in namespace " + ns
			}
			res := a.resources[kind]
			switch m {
			case workload.Listed:
				out = append(out, fmt.Sprintf("wave may list %s but not watch them %s (as Stakater Reloader's chart grants): they are listed again on every ConfigMap or Secret change and every minute; grant watch on %s to follow each change as it happens", res, where, res))
			case workload.Skipped:
				out = append(out, fmt.Sprintf("wave may not list %s %s (as Wave's chart grants nothing on CronJobs): they are not followed there; grant list and watch on %s to have them rolled", res, where, res))
			}
		}
	}
	slices.Sort(out)
	return out
}

// readyDetail is what /readyz adds to its answer: the kinds not followed, or not watched.
func (a kindAccess) readyDetail() string {
	return strings.Join(a.notes(), "\n")
}

// register exports how each kind is followed: configwave_wave_workload_kinds{kind,access}, the
// namespaces where it is followed so.
func (a kindAccess) register(reg prometheus.Registerer) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "configwave_wave_workload_kinds",
		Help: "Namespaces (all of them count as one) where wave follows a workload kind: access=watch (an informer), list (RBAC without watch: listed again on every config change), none (RBAC without list: not followed)."},
		[]string{"kind", "access"})
	for kind, byNS := range a.modes {
		for _, m := range []workload.Access{workload.Watched, workload.Listed, workload.Skipped} {
			g.WithLabelValues(string(kind), string(m)).Set(0)
		}
		for _, m := range byNS {
			g.WithLabelValues(string(kind), string(m)).Inc()
		}
	}
	reg.MustRegister(g)
}

// logNotes logs the notes at start.
func (a kindAccess) logNotes() {
	for _, n := range a.notes() {
		klog.InfoS(n)
	}
}

// checkPodAccess turns --crash-loop-detection off, in one line, where wave may not list pods
// (neither Stakater Reloader's chart nor Wave's grants it): a rollout's outcome is then told
// by the workload's own status and --rollout-deadline.
func checkPodAccess(ctx context.Context, cfg *config, cl *clients) error {
	if cl.pods == nil {
		return nil
	}
	missing, err := access.Missing(ctx, cl.kube, access.Each(cfg.namespaceList, "", "pods", "list")...)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		klog.InfoS("crash-loop detection off: wave may not " + missing[0].String() + "; a rollout's outcome is told by the workload's own status and --rollout-deadline; grant list on pods, or give --crash-loop-detection=false to say so")
		cl.pods = nil
	}
	return nil
}
