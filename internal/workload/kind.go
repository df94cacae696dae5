// Package workload is the one place that knows the workload kinds apart (Deployment,
// StatefulSet, DaemonSet, CronJob): their pod template, their informer, and how to read and patch
// them. Each kind is one file with one Type (a built-in kind with a typed client declares a
// typed[...] and names only where things are); a new kind is a new file and one entry in kinds.
//
//	w, ok := workload.Of(obj) // any kind, one view
//	err := workload.Patch(ctx, client, w.Kind, w.Meta.Namespace, w.Meta.Name, body)
package workload

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/configwave/configwave/internal/refs"
)

// Kind names a workload kind: "Deployment".
type Kind string

// Type is what wave needs of one workload kind.
type Type interface {
	Kind() Kind
	// Informer is the kind's informer in f.
	Informer(f informers.SharedInformerFactory) cache.SharedIndexInformer
	// Of is the Workload view of obj, or false when obj is of another kind.
	Of(obj any) (Workload, bool)
	Get(ctx context.Context, client kubernetes.Interface, namespace, name string) (Workload, error)
	// List returns one page; continueToken is "" after the last.
	List(ctx context.Context, client kubernetes.Interface, namespace string, opts metav1.ListOptions) (ws []Workload, continueToken string, err error)
	// Patch applies a merge patch.
	Patch(ctx context.Context, client kubernetes.Interface, namespace, name string, body []byte) error
	// Restart does, after wave wrote a new template, what that write does not do by itself:
	// nothing for the kinds whose controller rolls the pods, one Job now for a CronJob.
	Restart(ctx context.Context, client kubernetes.Interface, w Workload) error
}

// kinds are the kinds wave manages, each in its own file.
var kinds = []Type{deployments, statefulSets, daemonSets, cronJobs}

// Types lists the kinds wave manages.
func Types() []Type { return kinds }

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
	return w.Meta.Annotations[refs.UpdateOnConfigChangeAnnotation] == "true"
}

// String for logs and Events: "deployment ns/name".
func (w Workload) String() string {
	return fmt.Sprintf("%s %s/%s", strings.ToLower(string(w.Kind)), w.Meta.Namespace, w.Meta.Name)
}

// Restart does what a template write does not do by itself for w's kind (see Type).
func Restart(ctx context.Context, client kubernetes.Interface, w Workload) error {
	t, err := TypeOf(w.Kind)
	if err != nil {
		return err
	}
	return t.Restart(ctx, client, w)
}

// Patch applies a merge patch to a workload of kind.
func Patch(ctx context.Context, client kubernetes.Interface, kind Kind, namespace, name string, body []byte) error {
	t, err := TypeOf(kind)
	if err != nil {
		return err
	}
	return t.Patch(ctx, client, namespace, name, body)
}

// fieldManager names wave's writes in managedFields (and so to server-side apply users).
const fieldManager = "configwave-wave"
