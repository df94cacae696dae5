package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configwave/configwave/internal/wave/waveclient"
)

// DaemonSet is apps/v1 DaemonSet.
const DaemonSet Kind = "DaemonSet"

var daemonSets = typed[*appsv1.DaemonSet, *appsv1.DaemonSetList]{
	kind:     DaemonSet,
	resource: schema.GroupResource{Group: "apps", Resource: "daemonsets"},
	client: func(c waveclient.Interface, ns string) waveclient.Resource[*appsv1.DaemonSet, *appsv1.DaemonSetList] {
		return c.AppsV1().DaemonSets(ns)
	},
	view: func(o *appsv1.DaemonSet) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
		return &o.ObjectMeta, &o.Spec.Template
	},
	selector: func(o *appsv1.DaemonSet) *metav1.LabelSelector { return o.Spec.Selector },
	progress: daemonSetProgress,
	items:    func(l *appsv1.DaemonSetList) ([]*appsv1.DaemonSet, string) { return pointers(l.Items), l.Continue },
	reduced: func(o *appsv1.DaemonSet) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: o.ObjectMeta, Spec: appsv1.DaemonSetSpec{Selector: o.Spec.Selector, Template: o.Spec.Template}}
	},
	fresh: func() *appsv1.DaemonSet { return &appsv1.DaemonSet{} },
}
