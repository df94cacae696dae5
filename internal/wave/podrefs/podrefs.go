// Package podrefs finds which ConfigMaps and Secrets a pod template uses, and how: every key or
// some keys, required or optional, seen by the pods or only by Wave's hash. It also holds the
// annotations of Wave's dialect (update-on-config-change, extra-configmaps, ...). A new
// annotation dialect is a new file here.
//
//	used := podrefs.Extract(namespace, workload.Annotations, &template.Spec)
//	for _, ref := range used.Visible.Refs() { ... } // what a change must roll
package podrefs

import (
	"fmt"
	"slices"
	"strings"

	"github.com/configwave/configwave/internal/kube/configref"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations Wave defined; existing manifests carry them, so their names never change.
const (
	UpdateOnConfigChangeAnnotation = "wave.pusher.com/update-on-config-change"
	ConfigHashAnnotation           = "wave.pusher.com/config-hash"
	ExtraConfigMapsAnnotation      = "wave.pusher.com/extra-configmaps"
	ExtraSecretsAnnotation         = "wave.pusher.com/extra-secrets"
	WaveFinalizer                  = "wave.pusher.com/finalizer"
	// SchedulingDisabledAnnotation: Wave 0.7 and later, while a workload's config was
	// missing, set its pod template's schedulerName to one that does not exist, keeping the
	// original here, and restored it once the config existed. A workload switched over in
	// that state would wait forever: wave restores it the same way.
	SchedulingDisabledAnnotation = "wave.pusher.com/scheduling-disabled"
)

// IgnoreAnnotation on a ConfigMap or Secret takes it out of every hash and record: changing it
// rolls nothing. Stakater Reloader's reloader.stakater.com/ignore means the same.
const IgnoreAnnotation = "configwave.io/ignore"

// RevisionsAnnotation: "true" on a workload makes every revision of it keep the config it runs
// with (package revisions); "false" on a ConfigMap or Secret has it read live, for an object
// another system rotates in place.
const RevisionsAnnotation = "configwave.io/revisions"

// Ignored reports whether a ConfigMap's or Secret's annotations take it out of every hash and
// record (IgnoreAnnotation, or Reloader's ignore under the dialect's name).
func Ignored(annotations map[string]string, st StakaterDialect) bool {
	return isTrue(annotations[IgnoreAnnotation]) || st.Ignored(annotations)
}

// DropIgnored removes every object that ignored reports, and returns them.
func (r References) DropIgnored(ignored func(configref.Ref) bool) sets.Set[configref.Ref] {
	dropped := sets.New[configref.Ref]()
	for _, us := range []Uses{r.Visible, r.Wave} {
		for ref := range us {
			if dropped.Has(ref) || ignored(ref) {
				dropped.Insert(ref)
				delete(us, ref)
			}
		}
	}
	return dropped
}

// Use is how a pod template uses one object: every key, or some keys; and whether the pods
// start without it.
type Use struct {
	AllKeys bool
	// Keys maps each key used on its own to whether it is required (a missing required key
	// stops the pod from starting, as a missing required object does).
	Keys     map[string]bool
	Required bool   // some reference is not optional
	Where    string // first place it is used, for Events: `container "app" env`
}

func (u *Use) addKey(key string, required bool) {
	if u.Keys == nil {
		u.Keys = map[string]bool{}
	}
	u.Keys[key] = u.Keys[key] || required
}

// Uses is every object a pod template uses.
type Uses map[configref.Ref]*Use

func (us Uses) use(ref configref.Ref, required bool, where string) *Use {
	u, ok := us[ref]
	if !ok {
		u = &Use{Where: where}
		us[ref] = u
	}
	u.Required = u.Required || required
	return u
}

// Refs sorted, for stable output.
func (us Uses) Refs() []configref.Ref {
	refs := make([]configref.Ref, 0, len(us))
	for r := range us {
		refs = append(refs, r)
	}
	slices.SortFunc(refs, configref.Compare)
	return refs
}

// References are a template's uses in two views.
type References struct {
	// Visible is what the pods can actually see: containers and init containers, mounted
	// volumes only, and only the keys an `items` list projects. A change here rolls.
	Visible Uses
	// Wave is what Wave's hash covers, key for key as Wave selects them: containers only,
	// every volume, all keys of a configMap/secret volume even with items.
	Wave Uses
	// Problems are entries of the extra-* annotations that are not valid names; they are
	// skipped, and reported.
	Problems []string
}

// All is every object in either view, sorted, each once.
func (r References) All() []configref.Ref {
	all := append(r.Visible.Refs(), r.Wave.Refs()...)
	slices.SortFunc(all, configref.Compare)
	return slices.Compact(all)
}

// DropOtherNamespaces removes every object outside namespace, which only an extra-* entry can
// name, and returns them with where each was named. Without this, whoever may edit a workload
// could make wave read another namespace's config and write a hash of it where they can read it.
func (r References) DropOtherNamespaces(namespace string) map[configref.Ref]string {
	dropped := map[configref.Ref]string{}
	for _, us := range []Uses{r.Visible, r.Wave} {
		for ref, u := range us {
			if ref.Namespace != namespace {
				dropped[ref] = u.Where
				delete(us, ref)
			}
		}
	}
	return dropped
}

// Extract finds every ConfigMap and Secret a workload's pod template uses.
func Extract(namespace string, annotations map[string]string, spec *corev1.PodSpec) References {
	refs := References{Visible: Uses{}, Wave: Uses{}}
	mounted := map[string]bool{}
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		for _, m := range c.VolumeMounts {
			mounted[m.Name] = true
		}
	}
	for _, v := range spec.Volumes {
		where := fmt.Sprintf("volume %q", v.Name)
		switch {
		case v.ConfigMap != nil:
			addVolume(refs, mounted[v.Name], configref.Ref{Kind: configref.ConfigMap, Namespace: namespace, Name: v.ConfigMap.Name}, v.ConfigMap.Items, v.ConfigMap.Optional, where)
		case v.Secret != nil:
			addVolume(refs, mounted[v.Name], configref.Ref{Kind: configref.Secret, Namespace: namespace, Name: v.Secret.SecretName}, v.Secret.Items, v.Secret.Optional, where)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				switch {
				case src.ConfigMap != nil:
					addProjected(refs, mounted[v.Name], configref.Ref{Kind: configref.ConfigMap, Namespace: namespace, Name: src.ConfigMap.Name}, src.ConfigMap.Items, src.ConfigMap.Optional, where)
				case src.Secret != nil:
					addProjected(refs, mounted[v.Name], configref.Ref{Kind: configref.Secret, Namespace: namespace, Name: src.Secret.Name}, src.Secret.Items, src.Secret.Optional, where)
				}
			}
		}
	}
	for _, c := range spec.InitContainers {
		addContainer(refs.Visible, namespace, c, fmt.Sprintf("init container %q", c.Name))
	}
	for _, c := range spec.Containers {
		where := fmt.Sprintf("container %q", c.Name)
		addContainer(refs.Visible, namespace, c, where)
		addContainer(refs.Wave, namespace, c, where)
	}
	for _, a := range []struct {
		annotation string
		kind       configref.Kind
	}{{ExtraConfigMapsAnnotation, configref.ConfigMap}, {ExtraSecretsAnnotation, configref.Secret}} {
		extra, problems := ParseExtra(a.kind, namespace, annotations[a.annotation])
		for _, p := range problems {
			refs.Problems = append(refs.Problems, fmt.Sprintf("annotation %s: %s", a.annotation, p))
		}
		for _, r := range extra {
			where := "annotation " + a.annotation
			// Extra entries are always optional and contribute every key (Wave's rule).
			refs.Visible.use(r, false, where).AllKeys = true
			refs.Wave.use(r, false, where).AllKeys = true
		}
	}
	return refs
}

func optional(p *bool) bool { return p != nil && *p }

// addVolume: the pods see only the items' keys, Wave hashes every key.
func addVolume(refs References, mounted bool, ref configref.Ref, items []corev1.KeyToPath, opt *bool, where string) {
	required := !optional(opt)
	refs.Wave.use(ref, required, where).AllKeys = true
	if !mounted {
		return
	}
	u := refs.Visible.use(ref, required, where)
	if len(items) == 0 {
		u.AllKeys = true
	}
	for _, it := range items {
		u.addKey(it.Key, required)
	}
}

// addProjected: with items, the pods and Wave both take only those keys.
func addProjected(refs References, mounted bool, ref configref.Ref, items []corev1.KeyToPath, opt *bool, where string) {
	required := !optional(opt)
	views := []Uses{refs.Wave}
	if mounted {
		views = append(views, refs.Visible)
	}
	for _, us := range views {
		u := us.use(ref, required, where)
		if len(items) == 0 {
			u.AllKeys = true
		}
		for _, it := range items {
			u.addKey(it.Key, required)
		}
	}
}

func addContainer(us Uses, namespace string, c corev1.Container, where string) {
	for _, e := range c.EnvFrom {
		switch {
		case e.ConfigMapRef != nil:
			us.use(configref.Ref{Kind: configref.ConfigMap, Namespace: namespace, Name: e.ConfigMapRef.Name}, !optional(e.ConfigMapRef.Optional), where+" envFrom").AllKeys = true
		case e.SecretRef != nil:
			us.use(configref.Ref{Kind: configref.Secret, Namespace: namespace, Name: e.SecretRef.Name}, !optional(e.SecretRef.Optional), where+" envFrom").AllKeys = true
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			continue
		}
		where := fmt.Sprintf("%s env %s", where, e.Name)
		switch {
		case e.ValueFrom.ConfigMapKeyRef != nil:
			r := e.ValueFrom.ConfigMapKeyRef
			us.use(configref.Ref{Kind: configref.ConfigMap, Namespace: namespace, Name: r.Name}, !optional(r.Optional), where).addKey(r.Key, !optional(r.Optional))
		case e.ValueFrom.SecretKeyRef != nil:
			r := e.ValueFrom.SecretKeyRef
			us.use(configref.Ref{Kind: configref.Secret, Namespace: namespace, Name: r.Name}, !optional(r.Optional), where).addKey(r.Key, !optional(r.Optional))
		}
	}
}

// ParseExtra parses a wave.pusher.com/extra-configmaps or extra-secrets value: names or
// ns/name entries, separated by commas, blanks around them ignored. Invalid entries are
// returned as problems, never as references.
func ParseExtra(kind configref.Kind, namespace, value string) (refs []configref.Ref, problems []string) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	seen := map[configref.Ref]bool{}
	for _, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		ns, name := namespace, entry
		if i := strings.IndexByte(entry, '/'); i >= 0 {
			ns, name = entry[:i], entry[i+1:]
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				problems = append(problems, fmt.Sprintf("entry %q: namespace %q is not valid", entry, ns))
				continue
			}
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("entry %q: %q is not a valid %s name", entry, name, kind.Lower()))
			continue
		}
		r := configref.Ref{Kind: kind, Namespace: ns, Name: name}
		if !seen[r] {
			seen[r] = true
			refs = append(refs, r)
		}
	}
	return refs, problems
}

// MissingError says which required object or key is not there.
type MissingError struct {
	Ref   configref.Ref
	Key   string // empty when the whole object is missing
	Where string
}

func (e *MissingError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%s (used by %s) not found", e.Ref, e.Where)
	}
	return fmt.Sprintf("key %q of %s (used by %s) not found", e.Key, e.Ref, e.Where)
}
