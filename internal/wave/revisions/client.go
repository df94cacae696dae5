package revisions

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/waveclient"
)

// ClientAPI is the API of Ensure over wave's client.
type ClientAPI struct{ Core waveclient.CoreV1 }

// fieldManager names wave in the managed fields of what it creates.
const fieldManager = "configwave-wave"

func (a ClientAPI) Get(ctx context.Context, ref configref.Ref) (metav1.Object, error) {
	switch ref.Kind {
	case configref.ConfigMap:
		o, err := a.Core.ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return o, nil
	case configref.Secret:
		o, err := a.Core.Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return o, nil
	}
	return nil, fmt.Errorf("%s: not a ConfigMap or Secret", ref)
}

func (a ClientAPI) Create(ctx context.Context, kind configref.Kind, obj metav1.Object) (metav1.Object, error) {
	opts := metav1.CreateOptions{FieldManager: fieldManager}
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		made, err := a.Core.ConfigMaps(o.Namespace).Create(ctx, o, opts)
		if err != nil {
			return nil, err
		}
		return made, nil
	case *corev1.Secret:
		made, err := a.Core.Secrets(o.Namespace).Create(ctx, o, opts)
		if err != nil {
			return nil, err
		}
		return made, nil
	}
	return nil, fmt.Errorf("create %s %s/%s: a %T is not a ConfigMap or Secret", kind, obj.GetNamespace(), obj.GetName(), obj)
}
