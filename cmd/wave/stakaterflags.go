package main

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	flag "github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// Stakater Reloader's flags. Those that mean something here are accepted under Stakater's
// names, so that its Deployment's arguments carry over; the others are refused with one line
// that says what to use instead.
type stakaterFlags struct {
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
	names          podrefs.StakaterNames
	autoReloadAll  string
	// enableHA is --enable-ha: wave's leader election, on Stakater's own Lease unless
	// --leader-election-id names another.
	enableHA string
	// enableCSI is --enable-csi-integration: follow the Secrets Store CSI driver's pod
	// statuses.
	enableCSI string
	// webhookURL is --webhook-url: Stakater's mode that tells a webhook of every change
	// instead of rolling anything.
	webhookURL string
	pprofAddr  string
	refused    map[string]*string
}

// refusedStakaterFlags maps each Stakater flag wave does not take to what to use instead. None
// is left; a new Stakater flag with no equivalent goes here.
var refusedStakaterFlags = map[string]string{}

// booleanStakaterFlags are the refused and noted flags that Stakater declares as booleans:
// given without a value they mean true. The others take a value, given after "=" or as the next
// argument, as Stakater's chart renders some of them.
var booleanStakaterFlags = map[string]bool{"sync-after-restart": true}

// stakaterNameFlags are Stakater's flags that rename its annotations, with the field each sets.
var stakaterNameFlags = []struct {
	flag  string
	field func(*podrefs.StakaterNames) *string
}{
	{"auto-annotation", func(n *podrefs.StakaterNames) *string { return &n.Auto }},
	{"configmap-auto-annotation", func(n *podrefs.StakaterNames) *string { return &n.ConfigMapAuto }},
	{"secret-auto-annotation", func(n *podrefs.StakaterNames) *string { return &n.SecretAuto }},
	{"configmap-annotation", func(n *podrefs.StakaterNames) *string { return &n.ConfigMapReload }},
	{"secret-annotation", func(n *podrefs.StakaterNames) *string { return &n.SecretReload }},
	{"auto-search-annotation", func(n *podrefs.StakaterNames) *string { return &n.Search }},
	{"search-match-annotation", func(n *podrefs.StakaterNames) *string { return &n.Match }},
	{"ignore-annotation", func(n *podrefs.StakaterNames) *string { return &n.Ignore }},
	{"pause-deployment-annotation", func(n *podrefs.StakaterNames) *string { return &n.PausePeriod }},
	{"pause-deployment-time-annotation", func(n *podrefs.StakaterNames) *string { return &n.PausedAt }},
}

// notedStakaterFlags are Stakater flags wave takes and does not need: each given one is said in
// one line at start, and the switch goes on.
var notedStakaterFlags = map[string]string{
	"reload-strategy":    "wave always writes an annotation on the pod template (Reloader's annotations strategy, with no env var to add); the flag changes nothing",
	"sync-after-restart": "wave compares every workload with its config at start anyway; the flag changes nothing",
}

// notes are the lines to log at start for the noted flags given, in a stable order.
func (r *stakaterFlags) notes() []string {
	var out []string
	for name, why := range notedStakaterFlags {
		if *r.refused[name] != "" {
			out = append(out, fmt.Sprintf("--%s is Stakater Reloader's: %s", name, why))
		}
	}
	sort.Strings(out)
	return out
}

func (r *stakaterFlags) add(fs *flag.FlagSet) {
	fs.StringSliceVar(&r.namespacesToIgnore, "namespaces-to-ignore", nil, "Stakater Reloader's: namespaces whose workloads wave leaves alone.")
	fs.StringSliceVar(&r.resourcesToIgnore, "resources-to-ignore", nil, `Stakater Reloader's: "configmaps" or "secrets": changes of that kind roll nothing.`)
	fs.StringSliceVar(&r.ignoredWorkloadTypes, "ignored-workload-types", nil, `Stakater Reloader's: "jobs", "cronjobs" or both. "cronjobs": a change starts no Job from an opted-in CronJob. wave never restarts Jobs, so "jobs" changes nothing.`)
	fs.StringSliceVar(&r.namespaceSelector, "namespace-selector", nil, `Stakater Reloader's: only workloads in namespaces whose labels match, as key=value, key:value or key:* (any value); several are ANDed.`)
	fs.StringSliceVar(&r.resourceSelector, "resource-label-selector", nil, `Stakater Reloader's: only ConfigMaps and Secrets whose labels match roll anything, in the same syntax.`)
	fs.StringVar(&r.reloadOnCreate, "reload-on-create", "false", "Stakater Reloader's: the creation of an object Reloader's annotations follow rolls the workload.")
	fs.StringVar(&r.reloadOnDelete, "reload-on-delete", "false", "Stakater Reloader's: the deletion of an object Reloader's annotations follow (an optional one) rolls the workload.")
	fs.BoolVar(&r.enablePprof, "enable-pprof", false, "Stakater Reloader's: serve Go's profiles (/debug/pprof/, without the command line) on --pprof-addr.")
	fs.StringVar(&r.pprofAddr, "pprof-addr", "127.0.0.1:6060", "Stakater Reloader's: address of the profiles of --enable-pprof; loopback by default (reach it with kubectl port-forward), since profiles show what is in memory. Give :6060 for Reloader's every-address default.")
	fs.StringVar(&r.enableHA, "enable-ha", "false", "Stakater Reloader's: --leader-election, on Reloader's Lease "+stakaterLease+" unless --leader-election-id is given, so that a Reloader replica still running during the switch and wave never both act.")
	fs.Lookup("enable-ha").NoOptDefVal = "true"
	fs.StringVar(&r.enableCSI, "enable-csi-integration", "false", "Stakater Reloader's: follow SecretProviderClasses (Secrets Store CSI driver): a workload that Reloader's annotations select rolls when the versions its pods mounted change, as their SecretProviderClassPodStatuses report them. Needs list and watch on secretproviderclasspodstatuses and secretproviderclasses (secrets-store.csi.x-k8s.io); without the driver's CRDs, one line says so and nothing else changes.")
	fs.Lookup("enable-csi-integration").NoOptDefVal = "true"
	fs.StringVar(&r.webhookURL, "webhook-url", "", `Stakater Reloader's: instead of rolling workloads, POST Reloader's {"webhook":"update successful"} to this URL on every change of a ConfigMap's or Secret's data in the watched namespaces (its filters apply; creations and deletions with --reload-on-create, --reload-on-delete); no workload is ever written. "@FILE" reads the URL from a file; http:// only to loopback or with --allow-http-webhooks.`)
	fs.StringVar(&r.isArgoRollouts, "is-Argo-Rollouts", "", "")
	_ = fs.MarkHidden("is-Argo-Rollouts")
	fs.Lookup("is-Argo-Rollouts").NoOptDefVal = "true"
	fs.Lookup("reload-on-create").NoOptDefVal = "true"
	fs.Lookup("reload-on-delete").NoOptDefVal = "true"
	r.names = podrefs.DefaultStakaterNames
	for _, f := range stakaterNameFlags {
		p := f.field(&r.names)
		fs.StringVar(p, f.flag, *p, "Stakater Reloader's: read this annotation under this name instead.")
	}
	fs.StringVar(&r.autoReloadAll, "auto-reload-all", "false", `Stakater Reloader's: every workload follows the ConfigMaps and Secrets its pods use, as with reloader.stakater.com/auto: "true", unless it says otherwise in an auto annotation ("false").`)
	fs.Lookup("auto-reload-all").NoOptDefVal = "true"
	r.refused = map[string]*string{}
	names := slices.Concat(slices.Collect(maps.Keys(refusedStakaterFlags)), slices.Collect(maps.Keys(notedStakaterFlags)))
	for _, name := range names {
		r.refused[name] = fs.String(name, "", "")
		if booleanStakaterFlags[name] {
			fs.Lookup(name).NoOptDefVal = "true"
		}
		_ = fs.MarkHidden(name)
	}
}

// stakaterLease is the Lease Stakater Reloader elects its leader on (its constants.LockName).
const stakaterLease = "stakater-reloader-lock"

// csiIntegration reads --enable-csi-integration.
func (r *stakaterFlags) csiIntegration() (bool, error) {
	b, err := strconv.ParseBool(r.enableCSI)
	if err != nil {
		return false, fmt.Errorf("--enable-csi-integration=%q: use true or false", r.enableCSI)
	}
	return b, nil
}

// highAvailability reads --enable-ha.
func (r *stakaterFlags) highAvailability() (bool, error) {
	b, err := strconv.ParseBool(r.enableHA)
	if err != nil {
		return false, fmt.Errorf("--enable-ha=%q: use true or false", r.enableHA)
	}
	return b, nil
}

// check returns the first refused flag that was given, or a bad value, as one line.
func (r *stakaterFlags) check(c *rollout.StakaterOptions) error {
	names := make([]string, 0, len(r.refused))
	for name := range r.refused {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, noted := notedStakaterFlags[name]; !noted && *r.refused[name] != "" {
			return fmt.Errorf("--%s is Stakater Reloader's and means nothing to wave: %s", name, refusedStakaterFlags[name])
		}
	}
	for _, f := range stakaterNameFlags {
		if v := *f.field(&r.names); len(validation.IsQualifiedName(v)) > 0 {
			return fmt.Errorf("--%s=%q is not an annotation name; give one such as example.com/reload", f.flag, v)
		}
	}
	autoAll, err := strconv.ParseBool(r.autoReloadAll)
	if err != nil {
		return fmt.Errorf("--auto-reload-all=%q: use true or false", r.autoReloadAll)
	}
	c.Dialect = podrefs.StakaterDialect{Names: r.names, AutoReloadAll: autoAll}
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
	if c.NamespaceSelector, err = stakaterSelector("namespace-selector", r.namespaceSelector); err != nil {
		return err
	}
	if c.ResourceSelector, err = stakaterSelector("resource-label-selector", r.resourceSelector); err != nil {
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

// stakaterSelector reads Stakater's selector syntax: entries key=value, key:value, or key:* /
// key=* for any value, ANDed. nil for none.
func stakaterSelector(flagName string, entries []string) (labels.Selector, error) {
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
