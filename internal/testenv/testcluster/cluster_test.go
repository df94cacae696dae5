package testcluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) { testcluster.Main(m, &cluster) }

// The pattern every behaviour test follows: a template change makes the real Deployment
// controller create a new ReplicaSet, and kwok makes its pods Ready so the rollout completes.
func TestTemplateChangeRollsOutNewReplicaSet(t *testing.T) {
	c := testcluster.Need(t, cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := kubernetes.NewForConfigOrDie(c.Config())
	ns := testcluster.Namespace(t, client)

	d, err := client.AppsV1().Deployments(ns).Create(ctx, testcluster.Deployment(ns, "web", 2), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, testcluster.WaitDeploymentComplete(ctx, client, ns, "web", time.Minute))
	rs, err := testcluster.ReplicaSets(ctx, client, d)
	require.NoError(t, err)
	require.Len(t, rs, 1, "a new Deployment has one ReplicaSet")

	patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"example.com/rev":"2"}}}}}`)
	_, err = client.AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	require.NoError(t, testcluster.WaitDeploymentComplete(ctx, client, ns, "web", time.Minute))

	rs, err = testcluster.ReplicaSets(ctx, client, d)
	require.NoError(t, err)
	assert.Len(t, rs, 2, "a template change creates a second ReplicaSet")
	for _, r := range rs {
		if r.Spec.Template.Annotations["example.com/rev"] == "2" {
			assert.EqualValues(t, 2, r.Status.ReadyReplicas, "new ReplicaSet's pods are Ready")
		} else {
			assert.EqualValues(t, 0, *r.Spec.Replicas, "old ReplicaSet is scaled to zero")
		}
	}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	for _, p := range pods.Items {
		assert.Equal(t, testcluster.NodeName, p.Spec.NodeName, "pod %s scheduled to the kwok node", p.Name)
	}
}

func TestAPIServerRestartKeepsData(t *testing.T) {
	c := testcluster.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := kubernetes.NewForConfigOrDie(c.Config())
	ns := testcluster.Namespace(t, client)

	require.NoError(t, c.RestartAPIServer(ctx))
	_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	assert.NoError(t, err, "objects survive an API server restart")
}

// kube-controller-manager marks every pod on a node not ready once the node has been silent
// for --node-monitor-grace-period; kwok must renew the node's Lease as a kubelet does, or
// every cluster that lives past that period loses its running pods' readiness.
func TestNodeRenewsItsLease(t *testing.T) {
	c := testcluster.Need(t, cluster)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := kubernetes.NewForConfigOrDie(c.Config())

	var first time.Time
	require.Eventually(t, func() bool {
		l, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, testcluster.NodeName, metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return false
		}
		first = l.Spec.RenewTime.Time
		return true
	}, 30*time.Second, 200*time.Millisecond, "the node holds no Lease in kube-node-lease")
	require.Eventually(t, func() bool {
		l, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, testcluster.NodeName, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(first)
	}, 30*time.Second, 500*time.Millisecond, "the node's Lease was not renewed")
}
