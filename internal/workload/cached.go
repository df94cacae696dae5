package workload

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Cached is what the informers keep of a Deployment, StatefulSet or DaemonSet: its metadata,
// its Progress as its status gave it when it arrived, and of its spec the selector and the
// slim pod template (slimTemplate), protobuf-encoded. Of decodes them when read.
//
// It is its own type rather than a slim apps/v1 object because with 10,000 workloads the
// decoded spec is most of wave's heap: the apps/v1 struct alone is 1.2 KB, and the template's
// containers, volumes and maps as much again. A Deployment as the benchmark makes it takes
// about 1.3 KB this way, 4 KB slim. wave reads a workload's spec once per reconcile, and
// decoding its few hundred bytes costs microseconds there.
type Cached struct {
	metav1.ObjectMeta
	Kind     Kind
	Progress Progress
	// spec holds the fields Selector and Template of a DeploymentSpec, the same in the three
	// kinds: one encoding for all.
	spec []byte
}

// Compact returns what the informers keep of obj: a *Cached for a Deployment, StatefulSet or
// DaemonSet, anything else as it is (a CronJob's template becomes its Job's, so it is kept
// whole). wave writes workloads only with patches of its own fields, never by sending a cached
// object back, so nothing the cache lacks is lost.
func Compact(obj any) any {
	for _, t := range kinds {
		if c, ok := t.(compacter); ok {
			if out, ok := c.compact(obj); ok {
				return out
			}
		}
	}
	return obj
}

type compacter interface {
	// compact returns what the cache keeps of obj, and false when obj is of another kind.
	compact(obj any) (any, bool)
}

// newCached makes the Cached of an object of kind; it slims template in place.
func newCached(kind Kind, meta *metav1.ObjectMeta, template *corev1.PodTemplateSpec, selector *metav1.LabelSelector, p Progress) (*Cached, error) {
	slimTemplate(template)
	spec := appsv1.DeploymentSpec{Selector: selector, Template: *template}
	b, err := spec.Marshal()
	if err != nil {
		return nil, fmt.Errorf("encode the pod template of %s %s/%s for the cache: %w", kind, meta.Namespace, meta.Name, err)
	}
	return &Cached{ObjectMeta: *meta, Kind: kind, Progress: p, spec: b}, nil
}

// decode returns the selector and pod template.
func (c *Cached) decode() (*appsv1.DeploymentSpec, error) {
	var spec appsv1.DeploymentSpec
	if err := spec.Unmarshal(c.spec); err != nil {
		return nil, fmt.Errorf("decode the cached pod template of %s %s/%s: %w", c.Kind, c.Namespace, c.Name, err)
	}
	return &spec, nil
}

// GetObjectKind is empty, as of the objects the informers decode: the kind is the informer's.
func (c *Cached) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the metadata; the encoded spec is never written, so it is shared.
func (c *Cached) DeepCopyObject() runtime.Object {
	out := *c
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}
