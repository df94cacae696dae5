package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/digeststore"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/workload"
)

// Dialects are the annotation dialects wave reads (--annotations). The zero value reads both.
type Dialects struct{ Wave, Stakater bool }

func (d Dialects) orDefault() Dialects {
	if !d.Wave && !d.Stakater {
		return Dialects{Wave: true, Stakater: true}
	}
	return d
}

// ParseDialects reads --annotations: "wave", "stakater", or both, comma-separated.
func ParseDialects(s string) (Dialects, error) {
	var d Dialects
	for _, p := range strings.Split(s, ",") {
		switch strings.TrimSpace(p) {
		case "wave":
			d.Wave = true
		case "stakater":
			d.Stakater = true
		case "":
		default:
			return Dialects{}, fmt.Errorf("--annotations=%q: %q is not a dialect; use wave, stakater or both (wave,stakater)", s, strings.TrimSpace(p))
		}
	}
	if !d.Wave && !d.Stakater {
		return Dialects{}, fmt.Errorf("--annotations=%q: name at least one dialect: wave, stakater, or both", s)
	}
	return d, nil
}

// StakaterOptions are Stakater Reloader's flags that narrow what rolls, accepted under its
// names.
type StakaterOptions struct {
	Namespaces          map[string]bool // --namespaces-to-ignore: workloads there are left alone
	ConfigMaps, Secrets bool            // --resources-to-ignore: changes of that kind roll nothing
	// --reload-on-create, --reload-on-delete: for what Reloader's annotations follow, an
	// object's creation (deletion) rolls; Reloader's default is no.
	RollOnCreate, RollOnDelete bool
	// --ignored-workload-types=cronjobs: CronJobs start no Job on a change.
	IgnoreCronJobs bool
	// --namespace-selector: only workloads in namespaces with matching labels (the
	// Informers must watch namespaces: WatchNamespaces).
	NamespaceSelector labels.Selector
	// --resource-label-selector: only ConfigMaps and Secrets with matching labels roll anything
	// (the Digester must keep labels).
	ResourceSelector labels.Selector
	// Dialect: Reloader's annotation names (its --*-annotation flags) and --auto-reload-all.
	// The Digester must keep the match and ignore annotations under these names.
	Dialect podrefs.StakaterDialect
}

func (o StakaterOptions) ignores(kind configref.Kind) bool {
	return kind == configref.ConfigMap && o.ConfigMaps || kind == configref.Secret && o.Secrets
}

// selection is what a workload's annotations ask wave to follow, in the dialects it reads.
// A workload that speaks both dialects is one workload: one decision, one rollout per change.
type selection struct {
	wave     bool                   // Wave's opt-in: every object the pods use; Wave's hash written
	stakater *podrefs.StakaterRules // Reloader's annotations; nil without them
}

func (s selection) optedIn() bool { return s.wave || s.stakater != nil }

// Select reads a workload's annotations in the dialects d, Reloader's as st reads them.
func Select(d Dialects, st podrefs.StakaterDialect, w workload.Workload) (wave bool, stakater *podrefs.StakaterRules) {
	d = d.orDefault()
	if d.Wave {
		wave = w.OptedIn()
	}
	if d.Stakater {
		stakater = st.Parse(w.Meta.Annotations, w.Template.Annotations)
	}
	return wave, stakater
}

// selectionOf is what wave follows of w now: its annotations, where its namespace is selected.
func (c *Controller) selectionOf(w workload.Workload) selection {
	if !c.namespaceSelected(w.Meta.Namespace) {
		return selection{}
	}
	return c.annotated(w)
}

// annotated is what w's annotations ask for, given the flags alone. The index functions use
// it: an index must depend on nothing but the object indexed, so that a namespace relabelled
// into --namespace-selector finds its workloads indexed already.
func (c *Controller) annotated(w workload.Workload) selection {
	if c.Reloader.Namespaces[w.Meta.Namespace] || w.Kind == workload.CronJob && c.Reloader.IgnoreCronJobs {
		return selection{}
	}
	wave, st := Select(c.Dialects, c.Reloader.Dialect, w)
	return selection{wave: wave, stakater: st}
}

// namespaceSelected: --namespace-selector matches the namespace's labels, as the cache has
// them now (a relabel queues the namespace's workloads again).
func (c *Controller) namespaceSelected(namespace string) bool {
	sel := c.Reloader.NamespaceSelector
	return sel == nil || sel.Matches(labels.Set(c.Informers.namespaceLabels(namespace)))
}

// recorded is what the inputs record covers: every object the pods use, in either dialect,
// and the objects a Reloader reload list names, used or not. Whether a change of one rolls the
// workload is follows'.
func (c *Controller) recorded(ns string, used podrefs.References, sel selection) podrefs.Uses {
	if sel.stakater == nil {
		return used.Visible
	}
	uses := maps.Clone(used.Visible)
	patterns := sel.stakater.HasPatterns()
	for _, kind := range c.Informers.configKinds() {
		if patterns { // a regular expression may name any object of the namespace
			for _, name := range c.Informers.configNames(kind, ns) {
				r := configref.Ref{Kind: kind, Namespace: ns, Name: name}
				if _, ok := uses[r]; !ok && sel.stakater.Named(kind, name) {
					uses[r] = &podrefs.Use{AllKeys: true, Where: "a Reloader reload annotation"}
				}
			}
		}
		// Plain names, there or not yet (absent: their creation rolls).
		for _, re := range sel.stakater.NamesOf(kind) {
			if name, ok := podrefs.Literal(re); ok {
				r := configref.Ref{Kind: kind, Namespace: ns, Name: name}
				if _, ok := uses[r]; !ok {
					uses[r] = &podrefs.Use{AllKeys: true, Where: "a Reloader reload annotation"}
				}
			}
		}
	}
	return uses
}

// follows reports whether a change of the record entry rolls the workload.
func (c *Controller) follows(ns string, used podrefs.References, sel selection, ref configref.Ref) bool {
	if c.Reloader.ignores(ref.Kind) {
		return false
	}
	if sel := c.Reloader.ResourceSelector; sel != nil && !sel.Matches(labels.Set(c.Informers.configLabels(ref))) {
		return false
	}
	if sel.wave {
		return true // Wave rolls on every object the pods use
	}
	if sel.stakater == nil {
		return false
	}
	_, isUsed := used.Visible[ref]
	return sel.stakater.Follows(ref.Kind, ref.Name, isUsed, c.Informers.configAnnotations(ref))
}

// ignored reports whether a ConfigMap or Secret is out of every hash and record
// (configwave.io/ignore, or Reloader's ignore).
func (c *Controller) ignored(ref configref.Ref) bool {
	return podrefs.Ignored(c.Informers.configAnnotations(ref), c.Reloader.Dialect)
}

// stakaterMarks are the marks Stakater Reloader left on the template (its STAKATER_*_CONFIGMAP
// / _SECRET env vars, or its last-reloaded-from annotation) for each object it follows: the
// hashes of the data it last rolled the pods to.
func (c *Controller) stakaterMarks(w workload.Workload, ns string, used podrefs.References, sel selection, uses podrefs.Uses) map[configref.Ref][]string {
	env := map[string]string{}
	for _, cs := range [][]corev1.Container{w.Template.Spec.InitContainers, w.Template.Spec.Containers} {
		for _, c := range cs {
			for _, e := range c.Env {
				if strings.HasPrefix(e.Name, podrefs.StakaterEnvPrefix) && e.ValueFrom == nil {
					env[e.Name] = e.Value
				}
			}
		}
	}
	var last struct{ Type, Name, Namespace, Hash string }
	if v := w.Template.Annotations[podrefs.StakaterLastReloadedFrom]; v != "" {
		_ = json.Unmarshal([]byte(v), &last) // not Reloader's: no mark
	}
	if len(env) == 0 && last.Hash == "" {
		return nil
	}
	out := map[configref.Ref][]string{}
	for r := range uses {
		if !c.follows(ns, used, sel, r) {
			continue
		}
		if v, ok := env[podrefs.StakaterEnvName(r.Kind, r.Name)]; ok {
			out[r] = append(out[r], v)
		}
		if last.Hash != "" && strings.EqualFold(last.Type, string(r.Kind)) && last.Name == r.Name && (last.Namespace == "" || last.Namespace == ns) {
			out[r] = append(out[r], last.Hash)
		}
	}
	return out
}

// stakaterBehind reports whether a mark Stakater Reloader left on the template is not the hash
// of the current data of the object it names: Reloader was behind, and the pods run older
// config. With no mark, or only current ones, the pods run the current config.
func (c *Controller) stakaterBehind(ctx context.Context, w workload.Workload, ns string, used podrefs.References, sel selection, uses podrefs.Uses) (bool, string, error) {
	for r, marks := range c.stakaterMarks(w, ns, used, sel, uses) {
		current, exists, err := c.stakaterHash(ctx, r)
		if err != nil {
			return false, "", err
		}
		if !exists && r.Kind == configref.SecretProviderClass {
			continue // no pod reports on it: nothing to tell
		}
		for _, m := range marks {
			if !exists || m != current {
				return true, r.Kind.Lower() + "/" + r.Name + " (Reloader's mark is older)", nil
			}
		}
	}
	return false, "", nil
}

// stakaterCurrent reports whether every named object (record entry names) carries a mark of
// Reloader's on the template, each the hash of its current data: Reloader rolled the pods to
// it.
func (c *Controller) stakaterCurrent(ctx context.Context, w workload.Workload, ns string, used podrefs.References, sel selection, uses podrefs.Uses, names []string) (bool, error) {
	marks := c.stakaterMarks(w, ns, used, sel, uses)
	if len(marks) == 0 {
		return false, nil
	}
	byName := map[string]configref.Ref{}
	for r := range uses {
		byName[r.Short(ns)] = r
	}
	for _, name := range names {
		r, ok := byName[name]
		if !ok || len(marks[r]) == 0 {
			return false, nil
		}
		current, exists, err := c.stakaterHash(ctx, r)
		if err != nil || !exists {
			return false, err
		}
		for _, m := range marks[r] {
			if m != current {
				return false, nil
			}
		}
	}
	return true, nil
}

// stakaterHash is Reloader's hash of the current data of an object, and whether it exists.
func (c *Controller) stakaterHash(ctx context.Context, r configref.Ref) (string, bool, error) {
	if r.Kind == configref.SecretProviderClass {
		h, ok := c.Informers.secretProviderClassHash(r)
		return h, ok, nil
	}
	obj, err := c.full.get(ctx, r)
	if err != nil || obj == nil {
		return "", false, err
	}
	return confighash.StakaterHash(obj), true, nil
}

// configNames lists the names of one kind of config object in a namespace, from the cache.
func (inf *Informers) configNames(kind configref.Kind, namespace string) []string {
	var out []string
	for _, i := range inf.configs[kind] {
		if s, ok := i.GetIndexer().(*digeststore.Store); ok {
			out = append(out, s.Names(namespace)...)
			continue
		}
		keys, err := i.GetIndexer().IndexKeys(cache.NamespaceIndex, namespace)
		if err != nil { // an informer of one namespace may have no namespace index
			keys = i.GetIndexer().ListKeys()
		}
		for _, key := range keys {
			if ns, name, err := cache.SplitMetaNamespaceKey(key); err == nil && ns == namespace {
				out = append(out, name)
			}
		}
	}
	return out
}

// configLabels are a config object's labels, when the Digester keeps them.
func (inf *Informers) configLabels(ref configref.Ref) map[string]string {
	if obj, ok := inf.config(ref); ok {
		if m, ok := obj.(metav1.Object); ok {
			return m.GetLabels()
		}
	}
	return nil
}

// configAnnotations are the annotations the cache keeps of a config object (Reloader's match
// and ignore), or nil.
func (inf *Informers) configAnnotations(ref configref.Ref) map[string]string {
	obj, ok := inf.config(ref)
	if !ok {
		return nil
	}
	if m, ok := obj.(metav1.Object); ok {
		return m.GetAnnotations()
	}
	return nil
}
