package workload

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Deployment is apps/v1 Deployment.
const Deployment Kind = "Deployment"

type deployments struct{}

func (deployments) Kind() Kind { return Deployment }

func (deployments) Informer(f informers.SharedInformerFactory) cache.SharedIndexInformer {
	return f.Apps().V1().Deployments().Informer()
}

func (deployments) Of(obj any) (Workload, bool) {
	o, ok := obj.(*appsv1.Deployment)
	if !ok {
		return Workload{}, false
	}
	return Workload{Kind: Deployment, Object: o, Meta: &o.ObjectMeta, Template: &o.Spec.Template}, true
}

func (t deployments) Get(ctx context.Context, client kubernetes.Interface, namespace, name string) (Workload, error) {
	o, err := client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Workload{}, err
	}
	w, _ := t.Of(o)
	return w, nil
}

func (t deployments) List(ctx context.Context, client kubernetes.Interface, namespace string, opts metav1.ListOptions) ([]Workload, string, error) {
	l, err := client.AppsV1().Deployments(namespace).List(ctx, opts)
	if err != nil {
		return nil, "", err
	}
	ws := make([]Workload, len(l.Items))
	for i := range l.Items {
		ws[i], _ = t.Of(&l.Items[i])
	}
	return ws, l.Continue, nil
}

func (deployments) Patch(ctx context.Context, client kubernetes.Interface, namespace, name string, body []byte) error {
	_, err := client.AppsV1().Deployments(namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager})
	return err
}
