package revisions

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/waveclient"
)

var cluster *testcluster.Cluster

func TestMain(m *testing.M) { testcluster.Main(m, &cluster) }

// Against the API server: snapshots of a ConfigMap and of a TLS Secret are accepted as made,
// hold every key and cannot be changed; and a pod that names both in every place a pod spec
// can, rewritten by the webhook's patch, is accepted and names the snapshots everywhere,
// ephemeral containers (added through their subresource) included.
func TestSnapshotsAndRewrittenPodsThroughTheAPIServer(t *testing.T) {
	c := testcluster.Need(t, cluster)
	client, err := kubernetes.NewForConfig(c.Config())
	require.NoError(t, err)
	ns := testcluster.Namespace(t, client)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cm, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{"team": "a"}},
		Data:       map[string]string{"app.conf": "listen 80;\n"},
		BinaryData: map[string][]byte{"blob": {0, 0xff, 0x10}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	sec, err := client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": []byte("C"), "tls.key": []byte("K")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	cmSnap, err := SnapshotOf(cm, ContentID(map[string]string{"app.conf": "1", "blob": "2"}, ""))
	require.NoError(t, err)
	secSnap, err := SnapshotOf(sec, ContentID(map[string]string{"tls.crt": "3", "tls.key": "4"}, string(sec.Type)))
	require.NoError(t, err)
	gotCM, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cmSnap.(*corev1.ConfigMap), metav1.CreateOptions{})
	require.NoError(t, err)
	gotSec, err := client.CoreV1().Secrets(ns).Create(ctx, secSnap.(*corev1.Secret), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, cm.Data, gotCM.Data)
	assert.Equal(t, cm.BinaryData, gotCM.BinaryData)
	assert.Equal(t, sec.Data, gotSec.Data)
	assert.Equal(t, corev1.SecretTypeTLS, gotSec.Type)
	gotCM.Data["app.conf"] = "changed"
	_, err = client.CoreV1().ConfigMaps(ns).Update(ctx, gotCM, metav1.UpdateOptions{})
	assert.ErrorContains(t, err, "field is immutable when `immutable` is set", "a snapshot is never written after creation")

	snaps := Snapshots{
		{Kind: configref.ConfigMap, Namespace: ns, Name: "app"}: gotCM.Name,
		{Kind: configref.Secret, Namespace: ns, Name: "tls"}:    gotSec.Name,
	}
	optional := true
	cmRef := corev1.LocalObjectReference{Name: "app"}
	secRef := corev1.LocalObjectReference{Name: "tls"}
	envFrom := []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: cmRef}}, {SecretRef: &corev1.SecretEnvSource{LocalObjectReference: secRef}}}
	env := []corev1.EnvVar{
		{Name: "CONF", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: cmRef, Key: "app.conf"}}},
		{Name: "KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: secRef, Key: "tls.key", Optional: &optional}}},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: cmRef, Items: []corev1.KeyToPath{{Key: "app.conf", Path: "nginx.conf"}}}}},
				{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls", Optional: &optional}}},
				{Name: "both", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: cmRef}}, {Secret: &corev1.SecretProjection{LocalObjectReference: secRef}},
				}}}},
			},
			InitContainers: []corev1.Container{{Name: "init", Image: "app", EnvFrom: envFrom, Env: env}},
			Containers: []corev1.Container{{Name: "app", Image: "app", EnvFrom: envFrom, Env: env,
				VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/nginx/nginx.conf", SubPath: "nginx.conf"}, {Name: "certs", MountPath: "/certs"}, {Name: "both", MountPath: "/both"}}}},
		},
	}
	ops := Rewrite(ns, &pod.Spec, snaps)
	assert.Len(t, ops, 12, "3 volumes' 4 names, and 4 names in each of 2 containers")
	created, err := client.CoreV1().Pods(ns).Create(ctx, applyOps(t, pod, ops), metav1.CreateOptions{})
	require.NoError(t, err, "the API server takes the rewritten pod")
	assert.Empty(t, Rewrite(ns, &created.Spec, Snapshots{
		{Kind: configref.ConfigMap, Namespace: ns, Name: "app"}: "x",
		{Kind: configref.Secret, Namespace: ns, Name: "tls"}:    "x",
	}), "the stored pod names no source anywhere")
	assert.Equal(t, "nginx.conf", created.Spec.Containers[0].VolumeMounts[0].SubPath, "subPath keeps its meaning")
	assert.Equal(t, []corev1.KeyToPath{{Key: "app.conf", Path: "nginx.conf"}}, created.Spec.Volumes[0].ConfigMap.Items)
	assert.True(t, *created.Spec.Volumes[1].Secret.Optional)

	var withDebug *corev1.Pod
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error { // kwok updates the pod's status meanwhile
		current, err := client.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return err
		}
		current.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "app", EnvFrom: envFrom, Env: env}}}
		ops := Rewrite(ns, &current.Spec, snaps)
		if len(ops) != 4 {
			return fmt.Errorf("%d operations for the ephemeral container, want 4: %v", len(ops), ops)
		}
		withDebug, err = client.CoreV1().Pods(ns).UpdateEphemeralContainers(ctx, "p", applyOps(t, current, ops), metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err, "the API server takes the rewritten ephemeral container")
	assert.Empty(t, Rewrite(ns, &withDebug.Spec, Snapshots{
		{Kind: configref.ConfigMap, Namespace: ns, Name: "app"}: "x",
		{Kind: configref.Secret, Namespace: ns, Name: "tls"}:    "x",
	}))
}

// Against the API server: Ensure makes a revision's snapshots and index under wave's own
// client, finds them made on a second look, and makes a new snapshot of a source only for a
// new content. (The test cluster's API server admits past a ResourceQuota, so the quota's
// refusal is held by TestEnsureRefuses.)
func TestEnsureThroughTheAPIServer(t *testing.T) {
	c := testcluster.Need(t, cluster)
	client, err := kubernetes.NewForConfig(c.Config())
	require.NoError(t, err)
	wc, err := waveclient.New(c.Config())
	require.NoError(t, err)
	ns := testcluster.Namespace(t, client)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cm, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"k": "v1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	sec, err := client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Data: map[string][]byte{"pw": []byte("s3cret")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	api := ClientAPI{Core: wc.CoreV1()}
	sources := []Source{
		{configref.Ref{Kind: configref.ConfigMap, Namespace: ns, Name: "app"}, cm.ResourceVersion},
		{configref.Ref{Kind: configref.Secret, Namespace: ns, Name: "db"}, sec.ResourceVersion},
	}
	dg := confighash.Digester{SecretsByMetadata: true}
	snaps, err := Ensure(ctx, api, dg, ns, h1, sources)
	require.NoError(t, err)
	got, err := client.CoreV1().Secrets(ns).Get(ctx, snaps[sources[1].Ref], metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []byte("s3cret"), got.Data["pw"])
	index, err := client.CoreV1().ConfigMaps(ns).Get(ctx, IndexName(h1), metav1.GetOptions{})
	require.NoError(t, err)
	back, err := ParseIndex(ns, index.Data)
	require.NoError(t, err)
	assert.Equal(t, snaps, back)
	again, err := Ensure(ctx, api, dg, ns, h1, sources)
	require.NoError(t, err)
	assert.Equal(t, snaps, again)

	// A newer content of one source is a new snapshot of it; the other's is shared.
	cm.Data["k"] = "v2"
	cm, err = client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = Ensure(ctx, api, dg, ns, h2, sources)
	assert.ErrorIs(t, err, ErrSourceChanged, "decided on the old content")
	sources[0].ResourceVersion = cm.ResourceVersion
	next, err := Ensure(ctx, api, dg, ns, h2, sources)
	require.NoError(t, err)
	assert.NotEqual(t, snaps[sources[0].Ref], next[sources[0].Ref])
	assert.Equal(t, snaps[sources[1].Ref], next[sources[1].Ref])
	old, err := client.CoreV1().ConfigMaps(ns).Get(ctx, snaps[sources[0].Ref], metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "v1", old.Data["k"], "the old revision's snapshot keeps the old content")
}
