// Package waveclienttest serves a waveclient.Interface from client-go's clientset, the fake
// one in tests: its typed clients have waveclient's method sets already. Only tests import it,
// so wave's binary never links the clientset.
package waveclienttest

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	typedadmissionregistrationv1 "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	typedappsv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
	typedauthorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	typedbatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/watchlist"

	"github.com/configwave/configwave/internal/wave/waveclient"
)

// Wrap serves c as a waveclient.Interface.
func Wrap(c kubernetes.Interface) waveclient.Interface { return clientset{c} }

type clientset struct{ c kubernetes.Interface }

func (s clientset) CoreV1() waveclient.CoreV1   { return coreV1{s.c.CoreV1()} }
func (s clientset) AppsV1() waveclient.AppsV1   { return appsV1{s.c.AppsV1()} }
func (s clientset) BatchV1() waveclient.BatchV1 { return batchV1{s.c.BatchV1()} }
func (s clientset) CoordinationV1() waveclient.CoordinationV1 {
	return coordinationV1{s.c.CoordinationV1()}
}
func (s clientset) AuthorizationV1() waveclient.AuthorizationV1 {
	return authorizationV1{s.c.AuthorizationV1()}
}
func (s clientset) Discovery() waveclient.Discovery { return s.c.Discovery() }
func (s clientset) AdmissionregistrationV1() waveclient.AdmissionregistrationV1 {
	return admissionregistrationV1{s.c.AdmissionregistrationV1()}
}

type admissionregistrationV1 struct {
	c typedadmissionregistrationv1.AdmissionregistrationV1Interface
}

func (g admissionregistrationV1) MutatingWebhookConfigurations() waveclient.Resource[*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfigurationList] {
	return g.c.MutatingWebhookConfigurations()
}

// IsWatchListSemanticsUnSupported passes on what the fake says: informers must list, as it
// cannot stream a list in a watch.
func (s clientset) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(s.c)
}

type coreV1 struct{ c typedcorev1.CoreV1Interface }

func (g coreV1) ConfigMaps(ns string) waveclient.Resource[*corev1.ConfigMap, *corev1.ConfigMapList] {
	return g.c.ConfigMaps(ns)
}
func (g coreV1) Secrets(ns string) waveclient.Resource[*corev1.Secret, *corev1.SecretList] {
	return g.c.Secrets(ns)
}
func (g coreV1) Pods(ns string) waveclient.Resource[*corev1.Pod, *corev1.PodList] {
	return g.c.Pods(ns)
}
func (g coreV1) Events(ns string) waveclient.Resource[*corev1.Event, *corev1.EventList] {
	return g.c.Events(ns)
}
func (g coreV1) Namespaces() waveclient.Resource[*corev1.Namespace, *corev1.NamespaceList] {
	return g.c.Namespaces()
}
func (g coreV1) ServiceAccounts(ns string) waveclient.Resource[*corev1.ServiceAccount, *corev1.ServiceAccountList] {
	return g.c.ServiceAccounts(ns)
}

type appsV1 struct{ c typedappsv1.AppsV1Interface }

func (g appsV1) Deployments(ns string) waveclient.Resource[*appsv1.Deployment, *appsv1.DeploymentList] {
	return g.c.Deployments(ns)
}
func (g appsV1) StatefulSets(ns string) waveclient.Resource[*appsv1.StatefulSet, *appsv1.StatefulSetList] {
	return g.c.StatefulSets(ns)
}
func (g appsV1) DaemonSets(ns string) waveclient.Resource[*appsv1.DaemonSet, *appsv1.DaemonSetList] {
	return g.c.DaemonSets(ns)
}

func (g appsV1) ReplicaSets(ns string) waveclient.Resource[*appsv1.ReplicaSet, *appsv1.ReplicaSetList] {
	return g.c.ReplicaSets(ns)
}

func (g appsV1) ControllerRevisions(ns string) waveclient.Resource[*appsv1.ControllerRevision, *appsv1.ControllerRevisionList] {
	return g.c.ControllerRevisions(ns)
}

type batchV1 struct{ c typedbatchv1.BatchV1Interface }

func (g batchV1) CronJobs(ns string) waveclient.Resource[*batchv1.CronJob, *batchv1.CronJobList] {
	return g.c.CronJobs(ns)
}
func (g batchV1) Jobs(ns string) waveclient.Resource[*batchv1.Job, *batchv1.JobList] {
	return g.c.Jobs(ns)
}

type coordinationV1 struct {
	c typedcoordinationv1.CoordinationV1Interface
}

func (g coordinationV1) Leases(ns string) waveclient.Resource[*coordinationv1.Lease, *coordinationv1.LeaseList] {
	return g.c.Leases(ns)
}

type authorizationV1 struct {
	c typedauthorizationv1.AuthorizationV1Interface
}

func (g authorizationV1) SelfSubjectAccessReviews() waveclient.Creator[*authorizationv1.SelfSubjectAccessReview] {
	return g.c.SelfSubjectAccessReviews()
}
