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

// DaemonSet is apps/v1 DaemonSet.
const DaemonSet Kind = "DaemonSet"

type daemonSets struct{}

func (daemonSets) Kind() Kind { return DaemonSet }

func (daemonSets) Informer(f informers.SharedInformerFactory) cache.SharedIndexInformer {
	return f.Apps().V1().DaemonSets().Informer()
}

func (daemonSets) Of(obj any) (Workload, bool) {
	o, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		return Workload{}, false
	}
	return Workload{Kind: DaemonSet, Object: o, Meta: &o.ObjectMeta, Template: &o.Spec.Template}, true
}

func (t daemonSets) Get(ctx context.Context, client kubernetes.Interface, namespace, name string) (Workload, error) {
	o, err := client.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Workload{}, err
	}
	w, _ := t.Of(o)
	return w, nil
}

func (t daemonSets) List(ctx context.Context, client kubernetes.Interface, namespace string, opts metav1.ListOptions) ([]Workload, string, error) {
	l, err := client.AppsV1().DaemonSets(namespace).List(ctx, opts)
	if err != nil {
		return nil, "", err
	}
	ws := make([]Workload, len(l.Items))
	for i := range l.Items {
		ws[i], _ = t.Of(&l.Items[i])
	}
	return ws, l.Continue, nil
}

func (daemonSets) Patch(ctx context.Context, client kubernetes.Interface, namespace, name string, body []byte) error {
	_, err := client.AppsV1().DaemonSets(namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager})
	return err
}
