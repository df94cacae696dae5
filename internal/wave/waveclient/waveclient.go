// Package waveclient is wave's API client: typed clients of exactly the kinds wave reads and
// writes, in protobuf, without client-go's generated clientset. The clientset's scheme
// registers every API group, and linking it (through any typed client, informer factory or
// leaderelection's resourcelock) made about 10 MiB of wave's binary resident in every
// replica. The interfaces here are the generated clients' own method sets, narrowed, so the
// fake clientset serves the tests through waveclienttest.
package waveclient

import (
	"context"
	"encoding/json"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Resource is the part of a generated typed client (DeploymentInterface, ...) wave uses.
type Resource[T, L runtime.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Creator is a resource that can only be created (an access review).
type Creator[T runtime.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
}

// Interface is the clientset's shape, narrowed to what wave uses.
type Interface interface {
	CoreV1() CoreV1
	AppsV1() AppsV1
	BatchV1() BatchV1
	CoordinationV1() CoordinationV1
	AuthorizationV1() AuthorizationV1
	AdmissionregistrationV1() AdmissionregistrationV1
	Discovery() Discovery
}

type CoreV1 interface {
	ConfigMaps(namespace string) Resource[*corev1.ConfigMap, *corev1.ConfigMapList]
	Secrets(namespace string) Resource[*corev1.Secret, *corev1.SecretList]
	Pods(namespace string) Resource[*corev1.Pod, *corev1.PodList]
	Events(namespace string) Resource[*corev1.Event, *corev1.EventList]
	Namespaces() Resource[*corev1.Namespace, *corev1.NamespaceList]
	// ServiceAccounts: the revisions webhook reads whether a pod's enforces mountable secrets.
	ServiceAccounts(namespace string) Resource[*corev1.ServiceAccount, *corev1.ServiceAccountList]
}

type AppsV1 interface {
	Deployments(namespace string) Resource[*appsv1.Deployment, *appsv1.DeploymentList]
	StatefulSets(namespace string) Resource[*appsv1.StatefulSet, *appsv1.StatefulSetList]
	DaemonSets(namespace string) Resource[*appsv1.DaemonSet, *appsv1.DaemonSetList]
	// ReplicaSets and ControllerRevisions: the revisions of Deployments and Rollouts, and of
	// StatefulSets and DaemonSets, which own their config's snapshots (package revisions).
	ReplicaSets(namespace string) Resource[*appsv1.ReplicaSet, *appsv1.ReplicaSetList]
	ControllerRevisions(namespace string) Resource[*appsv1.ControllerRevision, *appsv1.ControllerRevisionList]
}

type BatchV1 interface {
	CronJobs(namespace string) Resource[*batchv1.CronJob, *batchv1.CronJobList]
	Jobs(namespace string) Resource[*batchv1.Job, *batchv1.JobList]
}

type CoordinationV1 interface {
	Leases(namespace string) Resource[*coordinationv1.Lease, *coordinationv1.LeaseList]
}

// AdmissionregistrationV1: the revisions webhook's registration, whose caBundle wave keeps at
// the CA it made (--revisions-webhook-cert-secret).
type AdmissionregistrationV1 interface {
	MutatingWebhookConfigurations() Resource[*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfigurationList]
}

type AuthorizationV1 interface {
	SelfSubjectAccessReviews() Creator[*authorizationv1.SelfSubjectAccessReview]
}

// Discovery is the part of client-go's discovery client wave uses: whether a custom
// resource is served.
type Discovery interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// Scheme holds the kinds wave reads and writes, and nothing else; Events refer to objects
// through it.
var Scheme = runtime.NewScheme()

var (
	codecs         = serializer.NewCodecFactory(Scheme)
	parameterCodec = runtime.NewParameterCodec(Scheme)
)

func init() {
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, coordinationv1.AddToScheme, authorizationv1.AddToScheme, admissionregistrationv1.AddToScheme} {
		if err := add(Scheme); err != nil {
			panic(err) // the types' own registration: a bug, found by every test
		}
	}
	// As client-go's scheme: Status and the options, unversioned.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
}

// Client is an Interface over one HTTP client, in protobuf as the generated clients speak.
type Client struct {
	core, apps, batch, coordination, authorization, admission rest.Interface
	discovery                                                 rest.Interface
}

var _ Interface = (*Client)(nil)

// New makes the clients for cfg.
func New(cfg *rest.Config) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	// One token bucket for every group, as the clientset shares one: --kube-api-qps is what
	// wave asks of the API server in all.
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, fmt.Errorf("create the API client: a burst of at least 1 is needed with a QPS of %g", cfg.QPS)
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("create the API client: %w", err)
	}
	group := func(gv schema.GroupVersion, path string) (rest.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion, c.APIPath = &gv, path
		c.NegotiatedSerializer = codecs.WithoutConversion()
		if c.UserAgent == "" {
			c.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		rc, err := rest.RESTClientForConfigAndClient(c, httpClient)
		if err != nil {
			return nil, fmt.Errorf("create the API client for %s: %w", gv, err)
		}
		return rc, nil
	}
	var out Client
	for _, g := range []struct {
		into *rest.Interface
		gv   schema.GroupVersion
		path string
	}{
		{&out.core, corev1.SchemeGroupVersion, "/api"},
		{&out.apps, appsv1.SchemeGroupVersion, "/apis"},
		{&out.batch, batchv1.SchemeGroupVersion, "/apis"},
		{&out.coordination, coordinationv1.SchemeGroupVersion, "/apis"},
		{&out.authorization, authorizationv1.SchemeGroupVersion, "/apis"},
		{&out.admission, admissionregistrationv1.SchemeGroupVersion, "/apis"},
	} {
		if *g.into, err = group(g.gv, g.path); err != nil {
			return nil, err
		}
	}
	d := rest.CopyConfig(cfg)
	d.GroupVersion, d.APIPath, d.NegotiatedSerializer = nil, "", codecs.WithoutConversion()
	if out.discovery, err = rest.UnversionedRESTClientForConfigAndClient(d, httpClient); err != nil {
		return nil, fmt.Errorf("create the discovery client: %w", err)
	}
	return &out, nil
}

func resource[T interface {
	runtime.Object
	metav1.Object
}, L runtime.Object](c rest.Interface, name, namespace string, newT func() T, newL func() L) Resource[T, L] {
	return gentype.NewClientWithList(name, c, parameterCodec, namespace, newT, newL, gentype.PrefersProtobuf[T]())
}

func (c *Client) CoreV1() CoreV1                   { return coreV1{c.core} }
func (c *Client) AppsV1() AppsV1                   { return appsV1{c.apps} }
func (c *Client) BatchV1() BatchV1                 { return batchV1{c.batch} }
func (c *Client) CoordinationV1() CoordinationV1   { return coordinationV1{c.coordination} }
func (c *Client) AuthorizationV1() AuthorizationV1 { return authorizationV1{c.authorization} }
func (c *Client) Discovery() Discovery             { return discovery{c.discovery} }
func (c *Client) AdmissionregistrationV1() AdmissionregistrationV1 {
	return admissionregistrationV1{c.admission}
}

type coreV1 struct{ c rest.Interface }

func (g coreV1) ConfigMaps(ns string) Resource[*corev1.ConfigMap, *corev1.ConfigMapList] {
	return resource(g.c, "configmaps", ns, func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} })
}

func (g coreV1) Secrets(ns string) Resource[*corev1.Secret, *corev1.SecretList] {
	return resource(g.c, "secrets", ns, func() *corev1.Secret { return &corev1.Secret{} }, func() *corev1.SecretList { return &corev1.SecretList{} })
}

func (g coreV1) Pods(ns string) Resource[*corev1.Pod, *corev1.PodList] {
	return resource(g.c, "pods", ns, func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} })
}

func (g coreV1) Events(ns string) Resource[*corev1.Event, *corev1.EventList] {
	return resource(g.c, "events", ns, func() *corev1.Event { return &corev1.Event{} }, func() *corev1.EventList { return &corev1.EventList{} })
}

func (g coreV1) Namespaces() Resource[*corev1.Namespace, *corev1.NamespaceList] {
	return resource(g.c, "namespaces", "", func() *corev1.Namespace { return &corev1.Namespace{} }, func() *corev1.NamespaceList { return &corev1.NamespaceList{} })
}

func (g coreV1) ServiceAccounts(ns string) Resource[*corev1.ServiceAccount, *corev1.ServiceAccountList] {
	return resource(g.c, "serviceaccounts", ns, func() *corev1.ServiceAccount { return &corev1.ServiceAccount{} }, func() *corev1.ServiceAccountList { return &corev1.ServiceAccountList{} })
}

type appsV1 struct{ c rest.Interface }

func (g appsV1) Deployments(ns string) Resource[*appsv1.Deployment, *appsv1.DeploymentList] {
	return resource(g.c, "deployments", ns, func() *appsv1.Deployment { return &appsv1.Deployment{} }, func() *appsv1.DeploymentList { return &appsv1.DeploymentList{} })
}

func (g appsV1) StatefulSets(ns string) Resource[*appsv1.StatefulSet, *appsv1.StatefulSetList] {
	return resource(g.c, "statefulsets", ns, func() *appsv1.StatefulSet { return &appsv1.StatefulSet{} }, func() *appsv1.StatefulSetList { return &appsv1.StatefulSetList{} })
}

func (g appsV1) DaemonSets(ns string) Resource[*appsv1.DaemonSet, *appsv1.DaemonSetList] {
	return resource(g.c, "daemonsets", ns, func() *appsv1.DaemonSet { return &appsv1.DaemonSet{} }, func() *appsv1.DaemonSetList { return &appsv1.DaemonSetList{} })
}

func (g appsV1) ReplicaSets(ns string) Resource[*appsv1.ReplicaSet, *appsv1.ReplicaSetList] {
	return resource(g.c, "replicasets", ns, func() *appsv1.ReplicaSet { return &appsv1.ReplicaSet{} }, func() *appsv1.ReplicaSetList { return &appsv1.ReplicaSetList{} })
}

func (g appsV1) ControllerRevisions(ns string) Resource[*appsv1.ControllerRevision, *appsv1.ControllerRevisionList] {
	return resource(g.c, "controllerrevisions", ns, func() *appsv1.ControllerRevision { return &appsv1.ControllerRevision{} }, func() *appsv1.ControllerRevisionList { return &appsv1.ControllerRevisionList{} })
}

type batchV1 struct{ c rest.Interface }

func (g batchV1) CronJobs(ns string) Resource[*batchv1.CronJob, *batchv1.CronJobList] {
	return resource(g.c, "cronjobs", ns, func() *batchv1.CronJob { return &batchv1.CronJob{} }, func() *batchv1.CronJobList { return &batchv1.CronJobList{} })
}

func (g batchV1) Jobs(ns string) Resource[*batchv1.Job, *batchv1.JobList] {
	return resource(g.c, "jobs", ns, func() *batchv1.Job { return &batchv1.Job{} }, func() *batchv1.JobList { return &batchv1.JobList{} })
}

type coordinationV1 struct{ c rest.Interface }

func (g coordinationV1) Leases(ns string) Resource[*coordinationv1.Lease, *coordinationv1.LeaseList] {
	return resource(g.c, "leases", ns, func() *coordinationv1.Lease { return &coordinationv1.Lease{} }, func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} })
}

type authorizationV1 struct{ c rest.Interface }

func (g authorizationV1) SelfSubjectAccessReviews() Creator[*authorizationv1.SelfSubjectAccessReview] {
	return gentype.NewClient("selfsubjectaccessreviews", g.c, parameterCodec, "",
		func() *authorizationv1.SelfSubjectAccessReview { return &authorizationv1.SelfSubjectAccessReview{} },
		gentype.PrefersProtobuf[*authorizationv1.SelfSubjectAccessReview]())
}

type admissionregistrationV1 struct{ c rest.Interface }

func (g admissionregistrationV1) MutatingWebhookConfigurations() Resource[*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfigurationList] {
	return resource(g.c, "mutatingwebhookconfigurations", "", func() *admissionregistrationv1.MutatingWebhookConfiguration {
		return &admissionregistrationv1.MutatingWebhookConfiguration{}
	}, func() *admissionregistrationv1.MutatingWebhookConfigurationList {
		return &admissionregistrationv1.MutatingWebhookConfigurationList{}
	})
}

type discovery struct{ c rest.Interface }

// ServerResourcesForGroupVersion reads /apis/GROUP/VERSION (/api/v1 for the core group), as
// client-go's discovery does; a group not served is a NotFound error.
func (d discovery) ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error) {
	path := "/apis/" + groupVersion
	if groupVersion == "v1" {
		path = "/api/v1"
	}
	raw, err := d.c.Get().AbsPath(path).SetHeader("Accept", "application/json").Do(context.TODO()).Raw()
	if err != nil {
		return nil, err
	}
	list := &metav1.APIResourceList{}
	if err := json.Unmarshal(raw, list); err != nil {
		return nil, fmt.Errorf("read the resources the API server serves in %s: %w", groupVersion, err)
	}
	// As client-go: an empty answer still names its group version.
	if list.GroupVersion == "" {
		list.GroupVersion = groupVersion
	}
	return list, nil
}
