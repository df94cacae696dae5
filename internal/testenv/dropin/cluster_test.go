package dropin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

func adminClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	if cluster == nil {
		t.Skip("needs the real control plane; skipped in -short mode")
	}
	client, err := kubernetes.NewForConfig(cluster.Config())
	require.NoError(t, err)
	return client
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// applyRBAC creates a rendered chart's namespace, ServiceAccount and RBAC exactly as rendered,
// and removes them when the test ends. Kinds it does not know fail the test: nothing the chart
// grants is left out silently.
func applyRBAC(t *testing.T, client kubernetes.Interface, objs []runtime.Object) {
	t.Helper()
	c := ctx(t)
	namespaces := map[string]bool{}
	var undo []func()
	t.Cleanup(func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	})
	ensureNS := func(ns string) {
		if ns == "" || namespaces[ns] {
			return
		}
		namespaces[ns] = true
		_, err := client.CoreV1().Namespaces().Create(c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err, "namespace %s (left by another test?)", ns)
		undo = append(undo, func() { deleteNamespace(t, client, ns) })
	}
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			ensureNS(o.Namespace)
			_, err = client.CoreV1().ServiceAccounts(o.Namespace).Create(c, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = client.RbacV1().ClusterRoles().Create(c, o, metav1.CreateOptions{})
			undo = append(undo, func() {
				_ = client.RbacV1().ClusterRoles().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			})
		case *rbacv1.ClusterRoleBinding:
			_, err = client.RbacV1().ClusterRoleBindings().Create(c, o, metav1.CreateOptions{})
			undo = append(undo, func() {
				_ = client.RbacV1().ClusterRoleBindings().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			})
		case *rbacv1.Role:
			ensureNS(o.Namespace)
			_, err = client.RbacV1().Roles(o.Namespace).Create(c, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			ensureNS(o.Namespace)
			_, err = client.RbacV1().RoleBindings(o.Namespace).Create(c, o, metav1.CreateOptions{})
		case *corev1.ConfigMap:
			ensureNS(o.Namespace)
			_, err = client.CoreV1().ConfigMaps(o.Namespace).Create(c, o, metav1.CreateOptions{})
		case *appsv1.Deployment, *appsv1.DaemonSet, *appsv1.StatefulSet:
			continue // run from our image by the test, not by the cluster
		case *corev1.Service, *unstructured.Unstructured:
			continue // routing and monitoring (a ServiceMonitor): nothing the pod's launch reads
		default:
			t.Fatalf("the rendered chart holds a %T the test does not apply", o)
		}
		require.NoError(t, err, "create %T from the rendered chart", o)
	}
}

// withNamespace sets the namespace helm leaves out of namespaced objects (Wave's chart does),
// as `helm install --namespace` does.
func withNamespace(objs []runtime.Object, ns string) []runtime.Object {
	for _, o := range objs {
		if m, ok := o.(metav1.Object); ok && m.GetNamespace() == "" {
			switch o.(type) {
			case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			default:
				m.SetNamespace(ns)
			}
		}
		if b, ok := o.(*rbacv1.ClusterRoleBinding); ok {
			for i := range b.Subjects {
				if b.Subjects[i].Kind == "ServiceAccount" && b.Subjects[i].Namespace == "" {
					b.Subjects[i].Namespace = ns
				}
			}
		}
	}
	return objs
}

func deleteNamespace(t *testing.T, client kubernetes.Interface, ns string) {
	_ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	// The next test may make a namespace of the same name: wait until it is gone.
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(c context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(c, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("namespace %s still there a minute after its deletion", ns)
	}
}

// appWithConfig makes a ConfigMap and a Deployment using it through envFrom, annotated as
// annotations say, in a namespace of the test's own; kube-controller-manager and kwok run it.
func appWithConfig(t *testing.T, client kubernetes.Interface, annotations map[string]string) (ns string, d *appsv1.Deployment) {
	t.Helper()
	return appWithConfigImage(t, client, annotations, "")
}

// appWithConfigImage is appWithConfig with the app's image (a real node's pods must have one
// the node holds); "" keeps kwok's.
func appWithConfigImage(t *testing.T, client kubernetes.Interface, annotations map[string]string, image string) (ns string, d *appsv1.Deployment) {
	t.Helper()
	ns = testcluster.Namespace(t, client)
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-config"},
		Data: map[string]string{"LEVEL": "info"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	d = testcluster.Deployment(ns, "app", 2)
	d.Annotations = annotations
	d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}}
	if image != "" {
		d.Spec.Template.Spec.Containers[0].Image = image
		d.Spec.Template.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
	}
	d, err = client.AppsV1().Deployments(ns).Create(ctx(t), d, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, "app", time.Minute))
	return ns, d
}

// rolledBy changes the app's ConfigMap once wave has taken the Deployment in (its inputs
// record written: a change before that is adopted, as a first sight is), and waits until the
// Deployment has rolled out new pods: a second ReplicaSet, complete, and only its pods running.
func rolledBy(t *testing.T, client kubernetes.Interface, ns string, waveLog func() string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx(t), 100*time.Millisecond, eventually, true, func(c context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments(ns).Get(c, "app", metav1.GetOptions{})
		return err == nil && d.Annotations["configwave.io/config-inputs"] != "", nil
	})
	require.NoError(t, err, "wave never took the Deployment in; its log:\n%s", waveLog())
	_, err = client.CoreV1().ConfigMaps(ns).Patch(ctx(t), "app-config", "application/merge-patch+json", []byte(`{"data":{"LEVEL":"debug"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	sets := waitReplicaSets(t, client, ns, 2, "the Deployment was not rolled after its ConfigMap changed", waveLog)
	require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, "app", time.Minute))
	pods, err := client.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: "app=app"})
	require.NoError(t, err)
	hashes := map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			hashes[p.Labels["pod-template-hash"]]++
		}
	}
	require.Equal(t, map[string]int{newest(sets).Labels["pod-template-hash"]: 2}, hashes, "the new template's pods, and only they, run")
}

func newest(sets []appsv1.ReplicaSet) appsv1.ReplicaSet {
	n := sets[0]
	for _, s := range sets[1:] {
		if s.Annotations["deployment.kubernetes.io/revision"] > n.Annotations["deployment.kubernetes.io/revision"] {
			n = s
		}
	}
	return n
}

// waitHTTP waits until addr in the pod's network answers path with 200.
func waitHTTP(t *testing.T, get func(addr, path string) (int, string), addr, path string, c *testcluster.Process) string {
	t.Helper()
	var body string
	deadline := time.Now().Add(eventually)
	for {
		var code int
		if code, body = get(addr, path); code == 200 {
			return body
		}
		if c.Exited() || time.Now().After(deadline) {
			t.Fatalf("%s%s did not answer 200 (last: %d %s); the container's log:\n%s", addr, path, code, strings.TrimSpace(body), c.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitReplicaSets waits until Deployment ns/app has n ReplicaSets, and returns them.
func waitReplicaSets(t *testing.T, client kubernetes.Interface, ns string, n int, failure string, waveLog func() string) []appsv1.ReplicaSet {
	t.Helper()
	var sets []appsv1.ReplicaSet
	err := wait.PollUntilContextTimeout(ctx(t), 100*time.Millisecond, eventually, true, func(c context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments(ns).Get(c, "app", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		sets, err = testcluster.ReplicaSets(c, client, d)
		return err == nil && len(sets) == n, nil
	})
	require.NoError(t, err, "%s; wave's log:\n%s", failure, waveLog())
	return sets
}
