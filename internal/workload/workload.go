// Package workload is the one place that knows the workload kinds apart (Deployment,
// StatefulSet, DaemonSet): their pod template, their informer and how to patch them.
//
//	w, ok := workload.Of(obj) // any kind, one view
//	err := workload.Patch(ctx, client, w.Kind, w.Meta.Namespace, w.Meta.Name, body)
package workload

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/refs"
)

// Kind is Deployment, StatefulSet or DaemonSet.
type Kind string

const (
	Deployment  Kind = "Deployment"
	StatefulSet Kind = "StatefulSet"
	DaemonSet   Kind = "DaemonSet"
)

// Kinds are the workload kinds the controller manages.
var Kinds = []Kind{Deployment, StatefulSet, DaemonSet}

// Workload is the part of a Deployment, StatefulSet or DaemonSet the controller reads.
type Workload struct {
	Kind     Kind
	Object   runtime.Object // for Events
	Meta     *metav1.ObjectMeta
	Template *corev1.PodTemplateSpec
}

// Of returns the Workload view of an object, or false for any other type.
func Of(obj any) (Workload, bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return Workload{Deployment, o, &o.ObjectMeta, &o.Spec.Template}, true
	case *appsv1.StatefulSet:
		return Workload{StatefulSet, o, &o.ObjectMeta, &o.Spec.Template}, true
	case *appsv1.DaemonSet:
		return Workload{DaemonSet, o, &o.ObjectMeta, &o.Spec.Template}, true
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

// Patch applies a merge patch to the workload.
func Patch(ctx context.Context, client kubernetes.Interface, kind Kind, namespace, name string, body []byte) error {
	opts := metav1.PatchOptions{FieldManager: "configwave-wave"}
	var err error
	switch kind {
	case Deployment:
		_, err = client.AppsV1().Deployments(namespace).Patch(ctx, name, types.MergePatchType, body, opts)
	case StatefulSet:
		_, err = client.AppsV1().StatefulSets(namespace).Patch(ctx, name, types.MergePatchType, body, opts)
	case DaemonSet:
		_, err = client.AppsV1().DaemonSets(namespace).Patch(ctx, name, types.MergePatchType, body, opts)
	default:
		err = fmt.Errorf("unknown workload kind %q", kind)
	}
	return err
}
