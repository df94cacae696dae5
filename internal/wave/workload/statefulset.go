package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configwave/configwave/internal/wave/waveclient"
)

// StatefulSet is apps/v1 StatefulSet.
const StatefulSet Kind = "StatefulSet"

var statefulSets = typed[*appsv1.StatefulSet, *appsv1.StatefulSetList]{
	kind:     StatefulSet,
	resource: schema.GroupResource{Group: "apps", Resource: "statefulsets"},
	client: func(c waveclient.Interface, ns string) waveclient.Resource[*appsv1.StatefulSet, *appsv1.StatefulSetList] {
		return c.AppsV1().StatefulSets(ns)
	},
	view: func(o *appsv1.StatefulSet) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
		return &o.ObjectMeta, &o.Spec.Template
	},
	selector: func(o *appsv1.StatefulSet) *metav1.LabelSelector { return o.Spec.Selector },
	progress: statefulSetProgress,
	items:    func(l *appsv1.StatefulSetList) ([]*appsv1.StatefulSet, string) { return pointers(l.Items), l.Continue },
	reduced: func(o *appsv1.StatefulSet) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: o.ObjectMeta, Spec: appsv1.StatefulSetSpec{Selector: o.Spec.Selector, Template: o.Spec.Template}}
	},
	fresh: func() *appsv1.StatefulSet { return &appsv1.StatefulSet{} },
}
