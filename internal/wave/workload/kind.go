// Package workload is the one place that knows the workload kinds apart (Deployment,
// StatefulSet, DaemonSet, CronJob, Argo Rollout): their pod template, their informer, and how
// to read and patch them. Each kind is one file with one Type (a built-in kind with a typed
// client declares a typed[...] and names only where things are; a custom resource also says
// which API resource it is, and is used only where discovery finds it served); a new kind is a
// new file and one entry in kinds.
//
//	kinds, err := workload.Served(discoveryClient) // the built-in kinds, and served custom ones
//	w, ok := workload.Of(obj)                      // any kind, one view
//	err = workload.Patch(ctx, clients, w.Kind, w.Meta.Namespace, w.Meta.Name, body)
package workload

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/configwave/configwave/internal/wave/informer"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/pollwatch"
	"github.com/configwave/configwave/internal/wave/waveclient"
)

// Kind names a workload kind: "Deployment".
type Kind string

// Clients are the API clients the kinds read and write through.
type Clients struct {
	Kube waveclient.Interface
	// Dynamic reads and writes the custom resources (Argo Rollouts); nil where none is served.
	Dynamic dynamic.Interface
}

// Type is what wave needs of one workload kind.
type Type interface {
	Kind() Kind
	// Informer is an informer of the kind in namespace (metav1.NamespaceAll for every one),
	// each list and watch narrowed by tweak.
	Informer(c Clients, namespace string, tweak func(*metav1.ListOptions), resync time.Duration) informer.Informer
	// GroupResource names the kind's API resource, for RBAC.
	GroupResource() schema.GroupResource
	// PolledInformer is an informer of the kind in namespace for a client that may list it
	// but not watch it: its watch is a list on every poke (listpoll).
	PolledInformer(c Clients, namespace string, tweak func(*metav1.ListOptions), poker *pollwatch.Poker, resync time.Duration) informer.Informer
	// Of is the Workload view of obj, or false when obj is of another kind.
	Of(obj any) (Workload, bool)
	Get(ctx context.Context, c Clients, namespace, name string) (Workload, error)
	// List returns one page; continueToken is "" after the last.
	List(ctx context.Context, c Clients, namespace string, opts metav1.ListOptions) (ws []Workload, continueToken string, err error)
	// Patch applies a merge patch.
	Patch(ctx context.Context, c Clients, namespace, name string, body []byte) error
	// Restart does, for a config change, what writing the template does not do by itself:
	// nothing for the kinds whose controller rolls the pods, one Job now for a CronJob.
	// change identifies the change: a second call with it does nothing more.
	Restart(ctx context.Context, c Clients, w Workload, change string) error
}

// templateElsewhere is a kind whose pod template is not at spec.template (a CronJob's).
type templateElsewhere interface {
	TemplatePath() []string
}

// TemplatePatch is a merge patch that writes template (a pod template's fields) into the
// pod template of a workload of kind: {"spec": {"template": template}} for most kinds.
func TemplatePatch(kind Kind, template map[string]any) map[string]any {
	path := []string{"spec", "template"}
	if e, ok := as[templateElsewhere](kind); ok {
		path = e.TemplatePath()
	}
	var v any = template
	for i := len(path) - 1; i > 0; i-- {
		v = map[string]any{path[i]: v}
	}
	return map[string]any{path[0]: v}
}

// inPlace is a kind that can restart its pods without a new template (an Argo Rollout's
// spec.restartAt), when the workload asks for that.
type inPlace interface {
	RestartsInPlace(w Workload) bool
	RestartAtPatch(at time.Time) map[string]any
}

// RestartsInPlace reports whether w asks to have its pods restarted without a template write
// (Stakater Reloader's rollout-strategy: restart on an Argo Rollout).
func RestartsInPlace(w Workload) bool {
	r, ok := as[inPlace](w.Kind)
	return ok && r.RestartsInPlace(w)
}

// RestartAtPatch is the merge patch that restarts the pods of a workload of kind at at, for
// the kinds RestartsInPlace can be true of; nil for the others.
func RestartAtPatch(kind Kind, at time.Time) map[string]any {
	if r, ok := as[inPlace](kind); ok {
		return r.RestartAtPatch(at)
	}
	return nil
}

// restartGate is a kind whose Restart may have to wait (a CronJob: suspended, Forbid).
type restartGate interface {
	RestartBlocked(w Workload) string
}

// RestartBlocked is why w's Restart must not run now; "" when it may, or has nothing to do.
func RestartBlocked(w Workload) string {
	if g, ok := as[restartGate](w.Kind); ok {
		return g.RestartBlocked(w)
	}
	return ""
}

// as is kind's Type as the optional interface T, when it implements it: what only some kinds
// can do is an interface of its own, asked for here.
func as[T any](kind Kind) (T, bool) {
	t, err := TypeOf(kind)
	if err != nil {
		var none T
		return none, false
	}
	c, ok := t.(T)
	return c, ok
}

// Connect makes the clients for cfg and asks discovery which kinds are served (Served).
func Connect(cfg *rest.Config) (Clients, []Type, error) {
	kube, err := waveclient.New(cfg)
	if err != nil {
		return Clients{}, nil, err
	}
	served, err := Served(kube.Discovery())
	if err != nil {
		return Clients{}, nil, err
	}
	c := Clients{Kube: kube}
	if len(served) > len(Builtin()) {
		if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
			return Clients{}, nil, fmt.Errorf("create the API client for custom resources: %w", err)
		}
	}
	return c, served, nil
}

// customResource is a Type whose API only a CustomResourceDefinition serves.
type customResource interface {
	Type
	Resource() schema.GroupVersionResource
}

// kinds are the kinds wave manages, each in its own file.
var kinds = []Type{deployments, statefulSets, daemonSets, cronJobs, argoRollouts}

// Builtin lists the kinds every API server serves.
func Builtin() []Type {
	var out []Type
	for _, t := range kinds {
		if _, custom := t.(customResource); !custom {
			out = append(out, t)
		}
	}
	return out
}

// Served lists the built-in kinds and the custom ones the API server serves now: without the
// CustomResourceDefinition, a kind is left out, with no watch and no error.
func Served(d waveclient.Discovery) ([]Type, error) {
	out := Builtin()
	for _, t := range kinds {
		cr, ok := t.(customResource)
		if !ok {
			continue
		}
		gvr := cr.Resource()
		list, err := d.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
		switch {
		case errors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("discover whether %s are served: %w", gvr.GroupResource(), err)
		}
		for _, r := range list.APIResources {
			if r.Name == gvr.Resource {
				out = append(out, t)
				break
			}
		}
	}
	return out, nil
}

// WaveTypes lists the kinds Wave (wave-k8s) itself managed, which a migration from it reads.
func WaveTypes() []Type { return []Type{deployments, statefulSets, daemonSets} }

// TypeOf returns the Type of kind.
func TypeOf(kind Kind) (Type, error) {
	for _, t := range kinds {
		if t.Kind() == kind {
			return t, nil
		}
	}
	return nil, fmt.Errorf("unknown workload kind %q", kind)
}

// Workload is the part of a workload the controller reads, whatever its kind.
type Workload struct {
	Kind     Kind
	Object   runtime.Object // for Events
	Meta     *metav1.ObjectMeta
	Template *corev1.PodTemplateSpec
	Selector *metav1.LabelSelector // of its pods
	Progress Progress              // how far the kind's controller got with the current template
}

// Of returns the Workload view of an object of any kind, or false for any other type.
func Of(obj any) (Workload, bool) {
	for _, t := range kinds {
		if w, ok := t.Of(obj); ok {
			return w, true
		}
	}
	return Workload{}, false
}

// KeyOf is the work queue key of a workload of any kind, without decoding what a Cached one
// keeps encoded (a change of a ConfigMap used by 1,000 workloads queues 1,000); false for any
// other object.
func KeyOf(obj any) (string, bool) {
	if c, ok := obj.(*Cached); ok {
		return Key(c.Kind, c.Namespace, c.Name), true
	}
	w, ok := Of(obj)
	if !ok {
		return "", false
	}
	return w.Key(), true
}

// Key is the work queue key: "Deployment/ns/name".
func (w Workload) Key() string { return Key(w.Kind, w.Meta.Namespace, w.Meta.Name) }

// Key builds a work queue key.
func Key(kind Kind, namespace, name string) string {
	return string(kind) + "/" + namespace + "/" + name
}

// SplitKey parses a work queue key.
func SplitKey(key string) (kind Kind, namespace, name string, err error) {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) != 3 {
		return "", "", "", fmt.Errorf("work queue key %q is not KIND/NAMESPACE/NAME", key)
	}
	return Kind(parts[0]), parts[1], parts[2], nil
}

// OptedIn reports whether the workload carries wave.pusher.com/update-on-config-change: "true".
func (w Workload) OptedIn() bool {
	return podrefs.WaveTrue(w.Meta.Annotations[podrefs.UpdateOnConfigChangeAnnotation])
}

// String for logs and Events: "deployment ns/name".
func (w Workload) String() string {
	return fmt.Sprintf("%s %s/%s", strings.ToLower(string(w.Kind)), w.Meta.Namespace, w.Meta.Name)
}

// Restart does what a template write does not do by itself for w's kind (see Type).
func Restart(ctx context.Context, c Clients, w Workload, change string) error {
	t, err := TypeOf(w.Kind)
	if err != nil {
		return err
	}
	return t.Restart(ctx, c, w, change)
}

// Patch applies a merge patch to a workload of kind.
func Patch(ctx context.Context, c Clients, kind Kind, namespace, name string, body []byte) error {
	t, err := TypeOf(kind)
	if err != nil {
		return err
	}
	return t.Patch(ctx, c, namespace, name, body)
}

// fieldManager names wave's writes in managedFields (and so to server-side apply users).
const fieldManager = "configwave-wave"

// Access is how wave follows a kind in a namespace, by what its RBAC lets it do there.
type Access string

const (
	Watched Access = "watch" // list and watch: an informer
	Listed  Access = "list"  // list without watch: an informer whose watch lists on every change (listpoll)
	Skipped Access = "none"  // not even list: not followed, said at start
)

// AccessOf decides how a kind is followed by what wave may do with it.
func AccessOf(list, watch bool) Access {
	switch {
	case list && watch:
		return Watched
	case list:
		return Listed
	}
	return Skipped
}
