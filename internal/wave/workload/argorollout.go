package workload

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configwave/configwave/internal/wave/informer"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/pollwatch"
)

// ArgoRollout is Argo Rollouts' Rollout (argoproj.io/v1alpha1), a Deployment's stand-in whose
// controller rolls out canary or blue-green: a template write starts a rollout there as it
// does for a Deployment. Served only where its CustomResourceDefinition is installed.
const ArgoRollout Kind = "Rollout"

var rolloutResource = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

// Rollout is the part of an Argo Rollout that wave reads; the informer keeps only this, not
// the whole object (its status alone carries canary and analysis state).
type Rollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              RolloutSpec   `json:"spec"`
	Status            RolloutStatus `json:"status"`
}

// RolloutSpec is the part of a Rollout's spec that wave reads. A Rollout with a workloadRef
// takes its template from a Deployment, which is where wave's annotations belong then.
type RolloutSpec struct {
	Replicas *int32                 `json:"replicas,omitempty"`
	Selector *metav1.LabelSelector  `json:"selector,omitempty"`
	Template corev1.PodTemplateSpec `json:"template"`
	// RestartAt asks the controller to restart every pod created before it (Reloader's
	// rollout-strategy: restart).
	RestartAt *metav1.Time `json:"restartAt,omitempty"`
}

// RolloutStatus is the part of a Rollout's status that says how far its rollout got.
type RolloutStatus struct {
	Abort bool `json:"abort,omitempty"`
	// ObservedGeneration is a string in Argo Rollouts: the generation's decimal digits.
	ObservedGeneration string `json:"observedGeneration,omitempty"`
	// Phase: Healthy, Progressing, Paused or Degraded.
	Phase      string             `json:"phase,omitempty"`
	Message    string             `json:"message,omitempty"`
	Conditions []RolloutCondition `json:"conditions,omitempty"`
	// RestartedAt is the spec.restartAt the controller has finished: every pod created before
	// it was restarted.
	RestartedAt *metav1.Time `json:"restartedAt,omitempty"`
}

// RolloutCondition is one of a Rollout's conditions.
type RolloutCondition struct {
	Type           string                 `json:"type"`
	Status         corev1.ConditionStatus `json:"status"`
	Reason         string                 `json:"reason,omitempty"`
	Message        string                 `json:"message,omitempty"`
	LastUpdateTime metav1.Time            `json:"lastUpdateTime,omitempty"`
}

// DeepCopyObject makes Rollout a runtime.Object, for Events.
func (r *Rollout) DeepCopyObject() runtime.Object {
	out := *r
	r.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	r.Spec.Template.DeepCopyInto(&out.Spec.Template)
	if r.Spec.Replicas != nil {
		n := *r.Spec.Replicas
		out.Spec.Replicas = &n
	}
	out.Spec.Selector = r.Spec.Selector.DeepCopy()
	out.Spec.RestartAt = r.Spec.RestartAt.DeepCopy()
	out.Status.RestartedAt = r.Status.RestartedAt.DeepCopy()
	out.Status.Conditions = append([]RolloutCondition(nil), r.Status.Conditions...)
	return &out
}

// rolloutFrom decodes a Rollout from the API's unstructured form. It is an informer transform,
// so it passes a Rollout through unchanged.
func rolloutFrom(obj any) (any, error) {
	switch o := obj.(type) {
	case *Rollout:
		return o, nil
	case *unstructured.Unstructured:
		r := &Rollout{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, r); err != nil {
			return nil, fmt.Errorf("decode rollout %s/%s: %w", o.GetNamespace(), o.GetName(), err)
		}
		r.APIVersion, r.Kind = rolloutResource.GroupVersion().String(), string(ArgoRollout)
		return r, nil
	}
	return obj, nil // a tombstone: the informer hands it on as is
}

type argoRolloutType struct{}

var argoRollouts argoRolloutType

func (argoRolloutType) Kind() Kind { return ArgoRollout }

func (argoRolloutType) Resource() schema.GroupVersionResource { return rolloutResource }

func (argoRolloutType) Informer(c Clients, namespace string, tweak func(*metav1.ListOptions), resync time.Duration) informer.Informer {
	// The transform: the cache holds only what wave reads.
	return informer.NewPlain[*unstructured.UnstructuredList](c.Dynamic.Resource(rolloutResource).Namespace(namespace), c.Dynamic, &unstructured.Unstructured{},
		cacheOptions(tweak, resync, rolloutFrom))
}

func (argoRolloutType) GroupResource() schema.GroupResource { return rolloutResource.GroupResource() }

func (argoRolloutType) PolledInformer(c Clients, namespace string, tweak func(*metav1.ListOptions), poker *pollwatch.Poker, resync time.Duration) informer.Informer {
	list := listFunc(func(o metav1.ListOptions) (runtime.Object, error) {
		tweak(&o)
		return c.Dynamic.Resource(rolloutResource).Namespace(namespace).List(context.Background(), o)
	})
	return informer.PlainOf(pollwatch.Wrap(list, poker, pollwatch.Interval), &unstructured.Unstructured{}, cacheOptions(nil, resync, rolloutFrom))
}

func (argoRolloutType) Of(obj any) (Workload, bool) {
	r, ok := obj.(*Rollout)
	if !ok {
		return Workload{}, false
	}
	return Workload{Kind: ArgoRollout, Object: r, Meta: &r.ObjectMeta, Template: &r.Spec.Template, Selector: r.Spec.Selector, Progress: rolloutProgress(r)}, true
}

func (t argoRolloutType) Get(ctx context.Context, c Clients, namespace, name string) (Workload, error) {
	if c.Dynamic == nil {
		return Workload{}, errNotServed
	}
	u, err := c.Dynamic.Resource(rolloutResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Workload{}, err
	}
	return t.view(u)
}

func (t argoRolloutType) List(ctx context.Context, c Clients, namespace string, opts metav1.ListOptions) ([]Workload, string, error) {
	if c.Dynamic == nil {
		return nil, "", errNotServed
	}
	l, err := c.Dynamic.Resource(rolloutResource).Namespace(namespace).List(ctx, opts)
	if err != nil {
		return nil, "", err
	}
	ws := make([]Workload, 0, len(l.Items))
	for i := range l.Items {
		w, err := t.view(&l.Items[i])
		if err != nil {
			return nil, "", err
		}
		ws = append(ws, w)
	}
	return ws, l.GetContinue(), nil
}

func (t argoRolloutType) view(u *unstructured.Unstructured) (Workload, error) {
	r, err := rolloutFrom(u)
	if err != nil {
		return Workload{}, err
	}
	w, _ := t.Of(r)
	return w, nil
}

func (argoRolloutType) Patch(ctx context.Context, c Clients, namespace, name string, body []byte) error {
	if c.Dynamic == nil {
		return errNotServed
	}
	_, err := c.Dynamic.Resource(rolloutResource).Namespace(namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager})
	return err
}

// Restart: the Rollout's controller starts a rollout when the template changes.
func (argoRolloutType) Restart(context.Context, Clients, Workload, string) error { return nil }

// RestartsInPlace: Stakater Reloader's reloader.stakater.com/rollout-strategy: "restart" asks
// for the pods to be restarted through spec.restartAt, the template left as it is (so a GitOps
// tool sees no change of it); any other value is the default, a template write.
func (argoRolloutType) RestartsInPlace(w Workload) bool {
	return w.Meta.Annotations[podrefs.StakaterRolloutStrategy] == "restart"
}

// RestartAtPatch sets spec.restartAt, as Reloader does (RFC 3339, seconds): the Argo
// controller then restarts every pod created before that time, a few at a time, and records
// status.restartedAt.
func (argoRolloutType) RestartAtPatch(at time.Time) map[string]any {
	return map[string]any{"spec": map[string]any{"restartAt": at.UTC().Format(time.RFC3339)}}
}

var errNotServed = fmt.Errorf("%s are not served here (install Argo Rollouts' CustomResourceDefinitions, then restart wave)", rolloutResource.GroupResource())

// rolloutProgress reads a Rollout's status as `kubectl argo rollouts status` does: Healthy is
// done, Degraded (a progress deadline passed, an analysis failed, an abort) is failed, and a
// rollout paused at a canary step is still rolling. Its controller enforces its own
// progressDeadlineSeconds.
func rolloutProgress(r *Rollout) Progress {
	observed := r.Status.ObservedGeneration == strconv.FormatInt(r.Generation, 10)
	p := Progress{Observed: observed, OwnDeadline: true}
	if !observed {
		return p
	}
	switch r.Status.Phase {
	case "Healthy":
		// A restart asked through spec.restartAt leaves the Rollout Healthy while its pods are
		// restarted; it is done once the controller records it in status.restartedAt.
		p.Done = r.Spec.RestartAt == nil || r.Status.RestartedAt != nil && !r.Status.RestartedAt.Before(r.Spec.RestartAt)
	case "Degraded":
		p.Failed = r.Status.Message
		if p.Failed == "" {
			p.Failed = "the Rollout is Degraded"
		}
		for _, c := range r.Status.Conditions {
			if c.Type == "Progressing" {
				p.FailedAt = c.LastUpdateTime.Time
			}
		}
	}
	return p
}
