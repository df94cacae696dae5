package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	flag "github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/configwave/configwave/internal/rollout"
)

// Stakater Reloader's flags. Those that mean something here are accepted under Reloader's
// names, so that its Deployment's arguments carry over; the others are refused with one line
// that says what to use instead.
type reloaderFlags struct {
	namespacesToIgnore   []string
	resourcesToIgnore    []string
	ignoredWorkloadTypes []string
	namespaceSelector    []string
	resourceSelector     []string
	reloadOnCreate       string
	reloadOnDelete       string
	// isArgoRollouts is accepted and needs no value: wave finds Argo Rollouts by discovery.
	isArgoRollouts string
	enablePprof    bool
	pprofAddr      string
	refused        map[string]*string
}

// refusedReloaderFlags maps each Reloader flag wave does not take to what to use instead.
var refusedReloaderFlags = map[string]string{
	"auto-reload-all":                  "wave rolls only workloads that opt in: annotate them with reloader.stakater.com/auto: \"true\"",
	"reload-strategy":                  "wave always writes an annotation on the pod template, which needs no strategy; remove the flag",
	"enable-ha":                        "use --leader-election",
	"log-format":                       "wave logs with klog; remove the flag",
	"log-level":                        "use --v (2 logs every decision)",
	"webhook-url":                      "wave rolls workloads itself; --notify-webhook reports rollouts that failed",
	"sync-after-restart":               "wave compares every workload with its config at start anyway; remove the flag",
	"enable-csi-integration":           "wave does not follow SecretProviderClasses; remove the flag",
	"configmap-annotation":             "wave reads Reloader's default annotation names only; rename the annotations in your manifests to those",
	"secret-annotation":                "wave reads Reloader's default annotation names only; rename the annotations in your manifests to those",
	"auto-annotation":                  "wave reads Reloader's default annotation names only; rename the annotations in your manifests to those",
	"configmap-auto-annotation":        "wave reads Reloader's default annotation names only; rename the annotations in your manifests to those",
	"secret-auto-annotation":           "wave reads Reloader's default annotation names only; rename the annotations in your manifests to those",
	"auto-search-annotation":           "wave reads Reloader's default annotation names only; rename the annotations in your manifests to those",
	"search-match-annotation":          "wave reads Reloader's default annotation names only; rename the annotations in your manifests to those",
	"ignore-annotation":                "wave reads Reloader's default annotation names only; rename the annotations in your manifests to those",
	"pause-deployment-annotation":      "wave reads Reloader's default annotation names only; rename the annotations in your manifests to those",
	"pause-deployment-time-annotation": "wave reads Reloader's default annotation names only; rename the annotations in your manifests to those",
}

func (r *reloaderFlags) add(fs *flag.FlagSet) {
	fs.StringSliceVar(&r.namespacesToIgnore, "namespaces-to-ignore", nil, "Stakater Reloader's: namespaces whose workloads wave leaves alone.")
	fs.StringSliceVar(&r.resourcesToIgnore, "resources-to-ignore", nil, `Stakater Reloader's: "configmaps" or "secrets": changes of that kind roll nothing.`)
	fs.StringSliceVar(&r.ignoredWorkloadTypes, "ignored-workload-types", nil, `Stakater Reloader's: "jobs", "cronjobs" or both. "cronjobs": a change starts no Job from an opted-in CronJob. wave never restarts Jobs, so "jobs" changes nothing.`)
	fs.StringSliceVar(&r.namespaceSelector, "namespace-selector", nil, `Stakater Reloader's: only workloads in namespaces whose labels match, as key=value, key:value or key:* (any value); several are ANDed.`)
	fs.StringSliceVar(&r.resourceSelector, "resource-label-selector", nil, `Stakater Reloader's: only ConfigMaps and Secrets whose labels match roll anything, in the same syntax.`)
	fs.StringVar(&r.reloadOnCreate, "reload-on-create", "false", "Stakater Reloader's: the creation of an object Reloader's annotations follow rolls the workload.")
	fs.StringVar(&r.reloadOnDelete, "reload-on-delete", "false", "Stakater Reloader's: the deletion of an object Reloader's annotations follow (an optional one) rolls the workload.")
	fs.BoolVar(&r.enablePprof, "enable-pprof", false, "Stakater Reloader's: serve Go's profiles (/debug/pprof/, without the command line) on --pprof-addr.")
	fs.StringVar(&r.pprofAddr, "pprof-addr", ":6060", "Stakater Reloader's: address of the profiles of --enable-pprof.")
	fs.StringVar(&r.isArgoRollouts, "is-Argo-Rollouts", "", "")
	_ = fs.MarkHidden("is-Argo-Rollouts")
	fs.Lookup("is-Argo-Rollouts").NoOptDefVal = "true"
	fs.Lookup("reload-on-create").NoOptDefVal = "true"
	fs.Lookup("reload-on-delete").NoOptDefVal = "true"
	r.refused = map[string]*string{}
	for name := range refusedReloaderFlags {
		r.refused[name] = fs.String(name, "", "")
		fs.Lookup(name).NoOptDefVal = "true" // Reloader's booleans may be given without a value
		_ = fs.MarkHidden(name)
	}
}

// check returns the first refused flag that was given, or a bad value, as one line.
func (r *reloaderFlags) check(c *rollout.ReloaderOptions) error {
	names := make([]string, 0, len(r.refused))
	for name := range r.refused {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if *r.refused[name] != "" {
			return fmt.Errorf("--%s is Stakater Reloader's and means nothing to wave: %s", name, refusedReloaderFlags[name])
		}
	}
	c.Namespaces = map[string]bool{}
	for _, ns := range r.namespacesToIgnore {
		if ns = strings.TrimSpace(ns); ns == "" {
			continue
		} else if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("--namespaces-to-ignore: %q is not a namespace name", ns)
		}
		c.Namespaces[strings.TrimSpace(ns)] = true
	}
	for _, res := range r.resourcesToIgnore {
		switch strings.ToLower(strings.TrimSpace(res)) {
		case "configmaps":
			c.ConfigMaps = true
		case "secrets":
			c.Secrets = true
		default:
			return fmt.Errorf("--resources-to-ignore: %q is not configmaps or secrets", res)
		}
	}
	if c.ConfigMaps && c.Secrets {
		return fmt.Errorf("--resources-to-ignore: ignoring both configmaps and secrets leaves wave nothing to do")
	}
	for _, t := range r.ignoredWorkloadTypes {
		switch strings.TrimSpace(t) {
		case "cronjobs":
			c.IgnoreCronJobs = true
		case "jobs":
		default:
			return fmt.Errorf("--ignored-workload-types: %q is not jobs or cronjobs", t)
		}
	}
	var err error
	if c.NamespaceSelector, err = reloaderSelector("namespace-selector", r.namespaceSelector); err != nil {
		return err
	}
	if c.ResourceSelector, err = reloaderSelector("resource-label-selector", r.resourceSelector); err != nil {
		return err
	}
	for name, v := range map[string]*bool{"reload-on-create": &c.RollOnCreate, "reload-on-delete": &c.RollOnDelete} {
		s := r.reloadOnCreate
		if name == "reload-on-delete" {
			s = r.reloadOnDelete
		}
		b, perr := strconv.ParseBool(s)
		if perr != nil {
			return fmt.Errorf("--%s=%q: use true or false", name, s)
		}
		*v = b
	}
	return nil
}

// reloaderSelector reads Reloader's selector syntax: entries key=value, key:value, or key:* /
// key=* for any value, ANDed. nil for none.
func reloaderSelector(flagName string, entries []string) (labels.Selector, error) {
	var parts []string
	for _, e := range entries {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		k, v, ok := strings.Cut(e, ":")
		if !ok {
			k, v, ok = strings.Cut(e, "=")
		}
		switch {
		case !ok || v == "*":
			parts = append(parts, strings.TrimSpace(k)) // the label exists
		default:
			parts = append(parts, strings.TrimSpace(k)+"="+strings.TrimSpace(v))
		}
	}
	if len(parts) == 0 {
		return nil, nil
	}
	sel, err := labels.Parse(strings.Join(parts, ","))
	if err != nil {
		return nil, fmt.Errorf("--%s=%q: %v; give key=value, key:value or key:*", flagName, strings.Join(entries, ","), err)
	}
	return sel, nil
}
