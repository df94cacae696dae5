package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
)

// A workload already being deleted waits only for Wave's finalizer. The migration removes its
// config's owner references before that finalizer, so when the workload goes, the garbage
// collector (running in the test's kube-controller-manager) has no ConfigMap or Secret of it
// to delete. The workload's ReplicaSet, which the collector does delete, shows it ran; a plain
// Deployment deleted beside it shows the same for a ConfigMap it owns.
func TestMigrationNeverLetsTheCollectorTakeConfig(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	app := deployment(ns, "app", withEnvKey("cm", "a"))
	app.Finalizers = []string{podrefs.WaveFinalizer}
	createDeployment(t, client, app)
	createDeployment(t, client, testcluster.Deployment(ns, "plain", 1))
	app, plain := getDeployment(t, client, ns, "app"), getDeployment(t, client, ns, "plain")
	owned := func(d metav1.Object, kind string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: d.GetName(), UID: d.GetUID(), BlockOwnerDeletion: ptr(true), Controller: ptr(false)}} // as Wave wrote it
	}
	for name, owner := range map[string]metav1.Object{"cm": app, "plain-cm": plain} {
		_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name,
			OwnerReferences: owned(owner, "Deployment")}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := client.CoreV1().Secrets(ns).Create(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec",
		OwnerReferences: owned(app, "Deployment")}, StringData: map[string]string{"p": "1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(replicaSets(t, client, ns, "app")) == 1 }, time.Minute, 50*time.Millisecond)

	background := metav1.DeletePropagationBackground
	for _, name := range []string{"app", "plain"} {
		require.NoError(t, client.AppsV1().Deployments(ns).Delete(ctx(t), name, metav1.DeleteOptions{PropagationPolicy: &background}))
	}
	require.Eventually(t, func() bool {
		_, err := client.CoreV1().ConfigMaps(ns).Get(ctx(t), "plain-cm", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 50*time.Millisecond, "the garbage collector runs: it took the plain Deployment's ConfigMap")
	require.NotNil(t, getDeployment(t, client, ns, "app").DeletionTimestamp, "app is being deleted, held by Wave's finalizer")

	// The order itself, not only its outcome (the collector may be slower than a wrong order):
	// the test cluster has one etcd, whose revisions order every write, so the revision of the
	// ConfigMap's owner-reference removal must come before that of app's deletion.
	cmWatch, err := client.CoreV1().ConfigMaps(ns).Watch(ctx(t), metav1.ListOptions{FieldSelector: "metadata.name=cm"})
	require.NoError(t, err)
	defer cmWatch.Stop()
	appWatch, err := client.AppsV1().Deployments(ns).Watch(ctx(t), metav1.ListOptions{FieldSelector: "metadata.name=app"})
	require.NoError(t, err)
	defer appWatch.Stop()

	p := testcluster.StartProcess(t, waveBin, nil, "--kubeconfig="+cluster.Kubeconfig(), "--namespaces="+ns, "--migrate-from-wave-v05")
	require.Equal(t, 0, p.Wait(t, time.Minute), p.Log())
	revisionOf := func(w watch.Interface, want watch.EventType) int64 {
		for {
			select {
			case ev := <-w.ResultChan():
				if ev.Type == want {
					m, err := meta.Accessor(ev.Object)
					require.NoError(t, err)
					rv, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
					require.NoError(t, err)
					return rv
				}
			case <-time.After(time.Minute):
				t.Fatalf("no %s event", want)
			}
		}
	}
	unowned, deleted := revisionOf(cmWatch, watch.Modified), revisionOf(appWatch, watch.Deleted)
	assert.Less(t, unowned, deleted, "owner references removed (revision %d) before the finalizer let the workload go (revision %d)", unowned, deleted)
	require.Eventually(t, func() bool {
		_, err := client.AppsV1().Deployments(ns).Get(ctx(t), "app", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 50*time.Millisecond, "with the finalizer gone the deletion completes")
	require.Eventually(t, func() bool {
		rs, err := client.AppsV1().ReplicaSets(ns).List(ctx(t), metav1.ListOptions{})
		require.NoError(t, err)
		return len(rs.Items) == 0
	}, time.Minute, 50*time.Millisecond, "the collector has handled app's dependents")
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx(t), "cm", metav1.GetOptions{})
	require.NoError(t, err, "the ConfigMap outlives the workload")
	assert.Empty(t, cm.OwnerReferences)
	assert.Equal(t, map[string]string{"a": "1"}, cm.Data)
	_, err = client.CoreV1().Secrets(ns).Get(ctx(t), "sec", metav1.GetOptions{})
	require.NoError(t, err, "the Secret outlives the workload")
}
