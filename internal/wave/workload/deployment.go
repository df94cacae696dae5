package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configwave/configwave/internal/wave/waveclient"
)

// Deployment is apps/v1 Deployment.
const Deployment Kind = "Deployment"

var deployments = typed[*appsv1.Deployment, *appsv1.DeploymentList]{
	kind:     Deployment,
	resource: schema.GroupResource{Group: "apps", Resource: "deployments"},
	client: func(c waveclient.Interface, ns string) waveclient.Resource[*appsv1.Deployment, *appsv1.DeploymentList] {
		return c.AppsV1().Deployments(ns)
	},
	view: func(o *appsv1.Deployment) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
		return &o.ObjectMeta, &o.Spec.Template
	},
	selector: func(o *appsv1.Deployment) *metav1.LabelSelector { return o.Spec.Selector },
	progress: deploymentProgress,
	items:    func(l *appsv1.DeploymentList) ([]*appsv1.Deployment, string) { return pointers(l.Items), l.Continue },
	reduced: func(o *appsv1.Deployment) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: o.ObjectMeta, Spec: appsv1.DeploymentSpec{Selector: o.Spec.Selector, Template: o.Spec.Template}}
	},
	fresh: func() *appsv1.Deployment { return &appsv1.Deployment{} },
}
