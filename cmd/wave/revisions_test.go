package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/configwave/configwave/internal/testenv/testcerts"
	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// A workload with configwave.io/revisions: turning them on rolls it once, each rollout keeps
// its config in snapshots named by an index, and `kubectl rollout undo` is held where it put
// the workload until the config changes again.
func TestRevisionsRollOnceKeepEachConfigAndHoldAnUndo(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "app", map[string]string{"k": "v1"})
	createSecret(t, client, ns, "db", map[string]string{"pw": "one"})
	p := startWave(t, ns)
	d := deployment(ns, "web",
		withVolume(corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("app")}}}),
		func(s *corev1.PodSpec) {
			s.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("db")}}}
		})
	d.Annotations[revisions.OptInAnnotation] = "true"
	createDeployment(t, client, d)

	// Turned on: one rollout, to a revision whose index names a snapshot of each source.
	require.Eventually(t, func() bool { return revisions.IsRevision(inputsHash(getDeployment(t, client, ns, "web"))) }, eventually, tick, "turning revisions on rolls once")
	d = getDeployment(t, client, ns, "web")
	v1 := inputsHash(d)
	assert.Equal(t, v1, d.Labels[revisions.RevisionLabel])
	require.Eventually(t, func() bool { return len(events(t, client, ns, "web", "ConfigRevisionsOn")) == 1 }, eventually, tick)
	snaps := index(t, client, ns, v1)
	require.Len(t, snaps, 2)
	appV1 := snaps["configmap.app"]
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx(t), appV1, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "v1", cm.Data["k"])
	assert.True(t, *cm.Immutable)
	sec, err := client.CoreV1().Secrets(ns).Get(ctx(t), snaps["secret.db"], metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []byte("one"), sec.Data["pw"])

	// A change: the next revision; the Secret's snapshot is shared, the ConfigMap's is new.
	patchCM(t, client, ns, "app", `{"data":{"k":"v2"}}`)
	d = waitTemplateHashChange(t, client, ns, "web", v1)
	v2 := inputsHash(d)
	require.True(t, revisions.IsRevision(v2))
	next := index(t, client, ns, v2)
	assert.NotEqual(t, appV1, next["configmap.app"])
	assert.Equal(t, snaps["secret.db"], next["secret.db"])
	require.Len(t, replicaSets(t, client, ns, "web"), 3, "created, turned on, changed")
	settle(t, p)

	// kubectl rollout undo: back at v1's template and annotations; wave holds it there.
	undoDeployment(t, client, ns, "web")
	require.Eventually(t, func() bool { return len(events(t, client, ns, "web", "ConfigRolledBack")) == 1 }, eventually, tick, "the hold is said")
	assert.Contains(t, events(t, client, ns, "web", "ConfigRolledBack")[0].Message, "revision "+v1)
	assert.Equal(t, 1.0, p.Metric("configwave_wave_workloads_held_by_rollback"))
	rolled := p.Metric(`configwave_wave_reconciles_total{result="rolled"}`)
	// Relisted and looked at again: still held (a resync looks the same way).
	require.Eventually(t, func() bool { return p.Metric(`configwave_wave_reconciles_total{result="rolled-back"}`) >= 2 }, eventually, tick)
	time.Sleep(2 * time.Second)
	assert.Equal(t, v1, inputsHash(getDeployment(t, client, ns, "web")), "wave does not roll an undo forward")
	assert.Equal(t, rolled, p.Metric(`configwave_wave_reconciles_total{result="rolled"}`))
	assert.Len(t, events(t, client, ns, "web", "ConfigRolledBack"), 1, "said once")

	// The next change rolls forward, and ends the hold.
	patchCM(t, client, ns, "app", `{"data":{"k":"v3"}}`)
	d = waitTemplateHashChange(t, client, ns, "web", v1)
	assert.NotEqual(t, v2, inputsHash(d))
	assert.Equal(t, inputsHash(d), d.Labels[revisions.RevisionLabel])
	require.Eventually(t, func() bool { return p.Metric("configwave_wave_workloads_held_by_rollback") == 0 }, eventually, tick)
}

// Snapshots live as long as the revisions that use them: with revisionHistoryLimit 1, after
// four changes the garbage collector has removed every snapshot and index that no kept
// ReplicaSet's pods read, and kept those the kept ones do; a snapshot that two revisions
// share (the Secret's) is kept.
func TestRevisionSnapshotsGoWithTheirReplicaSets(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	startWaveWithWebhook(t, client, ns)
	createCM(t, client, ns, "app", map[string]string{"k": "v0"})
	createSecret(t, client, ns, "db", map[string]string{"pw": "one"})
	d := deployment(ns, "web",
		withVolume(corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("app")}}}),
		withVolume(corev1.Volume{Name: "db", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}}))
	d.Annotations[revisions.OptInAnnotation] = "true"
	one := int32(1)
	d.Spec.RevisionHistoryLimit = &one
	createDeployment(t, client, d)
	require.Eventually(t, func() bool { return revisions.IsRevision(inputsHash(getDeployment(t, client, ns, "web"))) }, eventually, tick)
	for i := 1; i <= 4; i++ {
		before := inputsHash(getDeployment(t, client, ns, "web"))
		podOf(t, client, ns, before)
		require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, "web", eventually))
		patchCM(t, client, ns, "app", fmt.Sprintf(`{"data":{"k":"v%d"}}`, i))
		waitTemplateHashChange(t, client, ns, "web", before)
	}
	current := inputsHash(getDeployment(t, client, ns, "web"))
	podOf(t, client, ns, current)
	require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, "web", eventually))
	snaps := index(t, client, ns, current)

	managed := func() (configMaps, secrets []string) {
		sel := metav1.ListOptions{LabelSelector: revisions.ManagedByLabel + "=" + revisions.ManagedBy}
		cms, err := client.CoreV1().ConfigMaps(ns).List(ctx(t), sel)
		require.NoError(t, err)
		for _, o := range cms.Items {
			configMaps = append(configMaps, o.Name)
		}
		secs, err := client.CoreV1().Secrets(ns).List(ctx(t), sel)
		require.NoError(t, err)
		for _, o := range secs.Items {
			secrets = append(secrets, o.Name)
		}
		return configMaps, secrets
	}
	// Kept: at most the two ReplicaSets' snapshots of app and their two indexes; the one
	// Secret snapshot they share.
	var cms, secs []string
	assert.Eventually(t, func() bool { cms, secs = managed(); return len(cms) <= 4 }, time.Minute, 100*time.Millisecond, "the snapshots of pruned ReplicaSets are never removed")
	require.LessOrEqual(t, len(cms), 4, "left: %v", cms)
	assert.Contains(t, cms, snaps["configmap.app"], "the current revision's snapshot stays")
	assert.Contains(t, cms, revisions.IndexName(current), "and its index")
	assert.Equal(t, []string{snaps["secret.db"]}, secs, "one snapshot of the Secret, shared by every revision")
	rss, err := testcluster.ReplicaSets(ctx(t), client, getDeployment(t, client, ns, "web"))
	require.NoError(t, err)
	assert.Len(t, rss, 2, "revisionHistoryLimit 1: the current ReplicaSet and one before")
}

// A revision with no pod (scaled to 0), under a wave that serves no webhook: wave itself gives
// its snapshots and index to the revision's ReplicaSet once the Deployment's controller made
// it, so that they go with it; before, nothing owned them and they lived for ever. A
// StatefulSet's go to its ControllerRevision the same way.
func TestRevisionSnapshotsOfARevisionWithNoPodIsOwnedByIt(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	startWave(t, ns)
	createCM(t, client, ns, "app", map[string]string{"k": "v1"})
	vol := withVolume(corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("app")}}})
	d := deployment(ns, "web", vol)
	zero := int32(0)
	d.Spec.Replicas = &zero
	d.Annotations[revisions.OptInAnnotation] = "true"
	createDeployment(t, client, d)
	tmpl := deployment(ns, "db", vol).Spec.Template
	tmpl.Labels = map[string]string{"app": "db"}
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", Annotations: maps.Clone(d.Annotations)},
		Spec: appsv1.StatefulSetSpec{Replicas: &zero, ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl}}
	_, err := client.AppsV1().StatefulSets(ns).Create(ctx(t), set, metav1.CreateOptions{})
	require.NoError(t, err)

	ownedBy := func(kind string, rev string) func() bool {
		return func() bool {
			cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx(t), revisions.IndexName(rev), metav1.GetOptions{})
			if err != nil {
				return false
			}
			snap, err := client.CoreV1().ConfigMaps(ns).Get(ctx(t), cm.Data["configmap.app"], metav1.GetOptions{})
			if err != nil {
				return false
			}
			owns := func(refs []metav1.OwnerReference) bool {
				return slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.Kind == kind })
			}
			return owns(cm.OwnerReferences) && owns(snap.OwnerReferences)
		}
	}
	require.Eventually(t, func() bool { return revisions.IsRevision(inputsHash(getDeployment(t, client, ns, "web"))) }, eventually, tick)
	require.Eventually(t, ownedBy("ReplicaSet", inputsHash(getDeployment(t, client, ns, "web"))), eventually, tick,
		"the index and snapshot of a revision with no pod are owned by its ReplicaSet")
	var rev string
	require.Eventually(t, func() bool {
		s, err := client.AppsV1().StatefulSets(ns).Get(ctx(t), "db", metav1.GetOptions{})
		require.NoError(t, err)
		rev = s.Spec.Template.Annotations[rollout.InputsHashAnnotation]
		return revisions.IsRevision(rev)
	}, eventually, tick)
	require.Eventually(t, ownedBy("ControllerRevision", rev), eventually, tick, "and a StatefulSet's by its ControllerRevision")
}

// A backup restored into a cluster (Velero): the index and snapshots come back with owner
// references to the uids of the cluster they were saved in, which name nothing here, and the
// garbage collector removes them while the restored pods run the revision. wave makes them
// again from the sources (which hold the revision's content still), says so, and gives them to
// the revision's ReplicaSet; before, they stayed gone, and a restarted container of those pods
// could not start (CreateContainerConfigError).
func TestRevisionSnapshotsMadeAgainAfterARestore(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	// Nothing of the workload changes when the garbage collector takes them: wave sees the loss
	// at its next resync, which the test makes come soon.
	startWaveWithWebhook(t, client, ns, "--sync-period=3s")
	createCM(t, client, ns, "app", map[string]string{"k": "v1"})
	d := deployment(ns, "web", withVolume(corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("app")}}}))
	d.Annotations[revisions.OptInAnnotation] = "true"
	createDeployment(t, client, d)
	require.Eventually(t, func() bool { return revisions.IsRevision(inputsHash(getDeployment(t, client, ns, "web"))) }, eventually, tick)
	rev := inputsHash(getDeployment(t, client, ns, "web"))
	snap := index(t, client, ns, rev)["configmap.app"]
	pod := podOf(t, client, ns, rev)
	require.Equal(t, snap, pod.Spec.Volumes[0].ConfigMap.Name)
	owner := metav1.GetControllerOf(pod)
	require.NotNil(t, owner)
	ownedByTheReplicaSet := func() bool {
		for _, name := range []string{revisions.IndexName(rev), snap} {
			cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx(t), name, metav1.GetOptions{})
			if err != nil || !slices.ContainsFunc(cm.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == owner.UID }) {
				return false
			}
		}
		return true
	}
	// Owned first, as they were when the backup was made (and wave adds nothing after that).
	require.Eventually(t, ownedByTheReplicaSet, eventually, tick)

	// As restored: owned by the ReplicaSet of that name in the cluster they were saved in.
	elsewhere, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner.Name, UID: "0a0a0a0a-0000-4000-8000-000000000000"}}}})
	require.NoError(t, err)
	for _, name := range []string{revisions.IndexName(rev), snap} {
		_, err := client.CoreV1().ConfigMaps(ns).Patch(ctx(t), name, types.MergePatchType, elsewhere, metav1.PatchOptions{})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		_, err := client.CoreV1().ConfigMaps(ns).Get(ctx(t), snap, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, eventually, tick, "the garbage collector removes what names an owner that is not there")

	require.Eventually(t, func() bool { return len(events(t, client, ns, "web", "ConfigRevisionRestored")) > 0 }, time.Minute, tick, "wave never made the snapshots again")
	require.Eventually(t, ownedByTheReplicaSet, eventually, tick, "the index and snapshot are there again, owned by the revision's ReplicaSet")
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx(t), snap, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "v1", cm.Data["k"], "the revision's content")
	assert.Equal(t, rev, inputsHash(getDeployment(t, client, ns, "web")), "nothing rolled")
}

// A StatefulSet's and a DaemonSet's pods name their ControllerRevision by a label (a
// StatefulSet's its name, a DaemonSet's its hash), not by an owner reference: the snapshot
// they read is owned by that ControllerRevision, read for its uid.
func TestRevisionSnapshotsOfAStatefulSetAreOwnedByItsControllerRevision(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	startWaveWithWebhook(t, client, ns)
	createCM(t, client, ns, "app", map[string]string{"k": "v1"})
	annotations := map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true", revisions.OptInAnnotation: "true"}
	template := func(app string) corev1.PodTemplateSpec {
		tmpl := deployment(ns, "x", withEnvKey("app", "k")).Spec.Template
		tmpl.Labels = map[string]string{"app": app}
		return tmpl
	}
	_, err := client.AppsV1().StatefulSets(ns).Create(ctx(t), &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", Annotations: annotations},
		Spec: appsv1.StatefulSetSpec{Replicas: new(int32(1)), ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, Template: template("db")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.AppsV1().DaemonSets(ns).Create(ctx(t), &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent", Annotations: annotations},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}, Template: template("agent")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for name, revisionOf := range map[string]func() string{
		"db": func() string {
			s, err := client.AppsV1().StatefulSets(ns).Get(ctx(t), "db", metav1.GetOptions{})
			require.NoError(t, err)
			return s.Spec.Template.Annotations[rollout.InputsHashAnnotation]
		},
		"agent": func() string {
			d, err := client.AppsV1().DaemonSets(ns).Get(ctx(t), "agent", metav1.GetOptions{})
			require.NoError(t, err)
			return d.Spec.Template.Annotations[rollout.InputsHashAnnotation]
		},
	} {
		require.Eventually(t, func() bool { return revisions.IsRevision(revisionOf()) }, eventually, tick, "%s: turning revisions on rolls it once", name)
		rev := revisionOf()
		var pod corev1.Pod // the two share the revision (the same config): this one's own pod
		require.Eventually(t, func() bool {
			pods, err := client.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: "app=" + name})
			require.NoError(t, err)
			for _, p := range pods.Items {
				if p.Annotations[rollout.InputsHashAnnotation] == rev {
					pod = p
					return true
				}
			}
			return false
		}, eventually, tick, "%s: no pod of revision %s", name, rev)
		snap := index(t, client, ns, rev)["configmap.app"]
		assert.Equal(t, snap, pod.Spec.Containers[0].Env[0].ValueFrom.ConfigMapKeyRef.Name, name)
		crName := pod.Labels["controller-revision-hash"]
		if name == "agent" {
			crName = "agent-" + crName // a DaemonSet's pods carry the hash alone
		}
		cr, err := client.AppsV1().ControllerRevisions(ns).Get(ctx(t), crName, metav1.GetOptions{})
		require.NoError(t, err, name)
		require.Eventually(t, func() bool {
			cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx(t), snap, metav1.GetOptions{})
			require.NoError(t, err)
			for _, o := range cm.OwnerReferences {
				if o.UID == cr.UID && o.Kind == "ControllerRevision" {
					return true
				}
			}
			return false
		}, eventually, tick, "%s: the snapshot is owned by the pod's ControllerRevision", name)
	}
}

// index reads a revision's index.
func index(t *testing.T, client kubernetes.Interface, ns, revision string) map[string]string {
	t.Helper()
	var cm *corev1.ConfigMap
	require.Eventually(t, func() bool {
		var err error
		cm, err = client.CoreV1().ConfigMaps(ns).Get(ctx(t), revisions.IndexName(revision), metav1.GetOptions{})
		return err == nil
	}, eventually, tick, "no index of revision %s", revision)
	return cm.Data
}

// undoDeployment is `kubectl rollout undo deployment/NAME`.
func undoDeployment(t *testing.T, client kubernetes.Interface, ns, name string) {
	t.Helper()
	require.NoError(t, testcluster.RolloutUndo(ctx(t), client, ns, name))
}

// With the webhook registered as the chart registers it, the pods a ReplicaSet creates for a
// revision read its snapshots, while the Deployment as stored names the source; a pod of a
// revision whose index is gone is admitted all the same, on the live object, and the
// Deployment's Events say so.
func TestRevisionWebhookPointsPodsAtTheirSnapshots(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	startWaveWithWebhook(t, client, ns)

	createCM(t, client, ns, "app", map[string]string{"k": "v1"})
	d := deployment(ns, "web",
		withVolume(corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("app")}}}),
		withEnvKey("app", "k"))
	d.Annotations[revisions.OptInAnnotation] = "true"
	createDeployment(t, client, d)
	require.Eventually(t, func() bool { return revisions.IsRevision(inputsHash(getDeployment(t, client, ns, "web"))) }, eventually, tick)
	rev := inputsHash(getDeployment(t, client, ns, "web"))
	snap := index(t, client, ns, rev)["configmap.app"]
	require.NotEmpty(t, snap)

	pod := podOf(t, client, ns, rev)
	assert.Equal(t, snap, pod.Spec.Volumes[0].ConfigMap.Name, "the volume reads the revision's snapshot")
	assert.Equal(t, snap, pod.Spec.Containers[0].Env[0].ValueFrom.ConfigMapKeyRef.Name)
	stored := getDeployment(t, client, ns, "web")
	assert.Equal(t, "app", stored.Spec.Template.Spec.Volumes[0].ConfigMap.Name, "the Deployment, as in Git, names the source")

	// The index deleted by hand: the next pod is admitted, on the live object, and said.
	require.NoError(t, client.CoreV1().ConfigMaps(ns).Delete(ctx(t), revisions.IndexName(rev), metav1.DeleteOptions{}))
	// The webhook keeps an immutable index it read: a new wave (a restart) has none kept.
	// Scaling up another Deployment of the same revision would hit the kept index; a pod of a
	// revision never made shows the fallback instead.
	other := deployment(ns, "plain")
	other.Spec.Template.Annotations = map[string]string{rollout.InputsHashAnnotation: revisions.InputsHash("never made")}
	other.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("app")}}}}
	createDeployment(t, client, other)
	pod = podOf(t, client, ns, revisions.InputsHash("never made"))
	assert.Equal(t, "app", pod.Spec.Volumes[0].ConfigMap.Name, "admitted unchanged: the live object")
	require.Eventually(t, func() bool { return len(events(t, client, ns, "plain", "ConfigRevisionLive")) == 1 }, eventually, tick)
	assert.Contains(t, events(t, client, ns, "plain", "ConfigRevisionLive")[0].Message, "the pod reads the live objects")
}

// A ServiceAccount that enforces mountable secrets (kubernetes.io/enforce-mountable-secrets)
// makes the API server refuse a pod that names a Secret it does not list, as a snapshot is not:
// such a pod reads its Secrets live and its ConfigMaps from their snapshots, the ReplicaSet makes
// it, and the Deployment's Events say why (before, the ReplicaSet made no pod at all: "volume with
// secret.secretName=... is not allowed because service account app does not reference that
// secret").
func TestRevisionWebhookLeavesSecretsLiveForAServiceAccountThatEnforcesMountableSecrets(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	startWaveWithWebhook(t, client, ns)
	_, err := client.CoreV1().ServiceAccounts(ns).Create(ctx(t), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app",
		Annotations: map[string]string{revisions.EnforceMountableSecretsAnnotation: "true"}}, Secrets: []corev1.ObjectReference{{Name: "tls"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	createCM(t, client, ns, "app", map[string]string{"k": "v1"})
	_, err = client.CoreV1().Secrets(ns).Create(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Data: map[string][]byte{"key": []byte("one")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	d := deployment(ns, "web",
		withVolume(corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("app")}}}),
		withVolume(corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls"}}}))
	d.Annotations[revisions.OptInAnnotation] = "true"
	d.Spec.Template.Spec.ServiceAccountName = "app"
	createDeployment(t, client, d)
	require.Eventually(t, func() bool { return revisions.IsRevision(inputsHash(getDeployment(t, client, ns, "web"))) }, eventually, tick)
	rev := inputsHash(getDeployment(t, client, ns, "web"))
	pod := podOf(t, client, ns, rev)
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	assert.Equal(t, index(t, client, ns, rev)["configmap.app"], volumes["conf"].ConfigMap.Name, "the ConfigMap from its snapshot")
	assert.Equal(t, "tls", volumes["tls"].Secret.SecretName, "the Secret live: its snapshot would be refused")
	require.Eventually(t, func() bool { return len(events(t, client, ns, "web", "ConfigRevisionLive")) > 0 }, eventually, tick)
	assert.Contains(t, events(t, client, ns, "web", "ConfigRevisionLive")[0].Message, "enforces mountable secrets")
}

// startWaveWithWebhook runs wave for ns with its revisions webhook served and registered.
func startWaveWithWebhook(t *testing.T, client kubernetes.Interface, ns string, args ...string) *testcluster.Process {
	t.Helper()
	ca := testcerts.NewCA(t, "webhook-ca")
	dir := t.TempDir()
	crt, key := ca.Server(t, "configwave-wave.configwave-system.svc")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600))
	hookAddr := testcluster.FreeAddr(t)
	p := startWave(t, ns, append([]string{"--revisions-webhook-address=" + hookAddr, "--revisions-webhook-cert-dir=" + dir}, args...)...)
	registerRevisionWebhook(t, client, ns, "https://"+hookAddr+"/mutate-pods", ca.PEM)
	return p
}

// registerRevisionWebhook registers wave's webhook for the pods of one namespace, as the chart
// does for every namespace wave watches: failurePolicy Ignore, so a pod never waits on wave.
func registerRevisionWebhook(t *testing.T, client kubernetes.Interface, ns, url string, caPEM []byte) {
	t.Helper()
	ignore, none, timeout := admissionregistrationv1.Ignore, admissionregistrationv1.SideEffectClassNoneOnDryRun, int32(5)
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "configwave-revisions-" + ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "pods.revisions.configwave.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			Rules: []admissionregistrationv1.RuleWithOperations{
				{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}},
				{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/ephemeralcontainers"}}},
			},
			FailurePolicy:           &ignore,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
		}},
	}
	_, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx(t), cfg, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), cfg.Name, metav1.DeleteOptions{})
	})
}

// podOf waits for a pod of the revision and returns it.
func podOf(t *testing.T, client kubernetes.Interface, ns, revision string) *corev1.Pod {
	t.Helper()
	var found *corev1.Pod
	require.Eventually(t, func() bool {
		pods, err := client.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{})
		require.NoError(t, err)
		for i, p := range pods.Items {
			if p.Annotations[rollout.InputsHashAnnotation] == revision {
				found = &pods.Items[i]
				return true
			}
		}
		return false
	}, eventually, tick, "no pod of revision %s", revision)
	return found
}

// An Argo Rollouts canary of a config change is a canary with revisions: while the canary
// step pauses, the canary pod reads the new revision's snapshot and the stable pods keep the
// old one (kubelet's refresh of an immutable snapshot changes nothing); an abort leaves only
// pods that read the old one, and wave does not roll again.
func TestRevisionsCanaryIsolatesTheNewConfig(t *testing.T) {
	client := adminClient(t)
	testcluster.StartArgoRollouts(t, cluster)
	ns := testcluster.Namespace(t, client)
	p := startWaveWithWebhook(t, client, ns)
	createCM(t, client, ns, "cm", map[string]string{"a": "v1"})
	c := startCanary(t, ns, nil)
	revision, promote := c.revision, c.promote
	// pods maps each running pod's revision to the ConfigMaps its envFrom reads.
	pods := func() map[string][]string {
		list, err := client.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{})
		require.NoError(t, err)
		out := map[string][]string{}
		for _, pod := range list.Items {
			if pod.DeletionTimestamp == nil {
				rev := pod.Annotations[rollout.InputsHashAnnotation]
				out[rev] = append(out[rev], pod.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name)
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return revisions.IsRevision(revision()) }, eventually, tick, "turning revisions on rolls once")
	v1 := revision()
	// Turning on is a canary too: promote it, so that both pods run v1 from the snapshot.
	snap1 := index(t, client, ns, v1)["configmap.cm"]
	require.Eventually(t, func() bool {
		if len(pods()[v1]) < 1 {
			return false
		}
		promote()
		got := pods()
		return len(got) == 1 && len(got[v1]) == 2
	}, time.Minute, 200*time.Millisecond, "v1 on both pods")
	assert.Equal(t, []string{snap1, snap1}, pods()[v1])
	settle(t, p)

	patchCM(t, client, ns, "cm", `{"data":{"a":"v2"}}`)
	require.Eventually(t, func() bool { return revision() != v1 }, eventually, tick)
	v2 := revision()
	snap2 := index(t, client, ns, v2)["configmap.cm"]
	require.Eventually(t, func() bool { got := pods(); return len(got[v2]) == 1 && len(got[v1]) >= 1 }, time.Minute, 100*time.Millisecond, "the canary step: one pod of v2 beside v1's")
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		got := pods()
		require.Equal(t, []string{snap2}, got[v2], "the canary pod reads the new snapshot")
		for _, name := range got[v1] {
			require.Equal(t, snap1, name, "every stable pod keeps the old one")
		}
	}

	// kubectl argo rollouts abort: status.abort, and the canary goes.
	c.abort()
	require.Eventually(t, func() bool { got := pods(); return len(got) == 1 && len(got[v1]) == 2 }, time.Minute, 100*time.Millisecond, "after the abort, only v1's pods")
	assert.Equal(t, []string{snap1, snap1}, pods()[v1])
	rolled := p.Metric(`configwave_wave_reconciles_total{result="rolled"}`)
	settle(t, p)
	assert.Equal(t, rolled, p.Metric(`configwave_wave_reconciles_total{result="rolled"}`), "wave rolls nothing after the abort")
	assert.Equal(t, v2, revision(), "the template stays as Argo left it")
}

// canary is an Argo Rollout "web" of 2 pods with a canary step at setWeight 50 and a pause,
// opted in to revisions, and what the tests do with it as kubectl argo rollouts does.
type canary struct {
	revision func() string // the template's inputs hash
	promote  func()        // past the pause
	abort    func()
}

// startCanary creates it, with template as its pod template (nil: argoRollout's).
func startCanary(t *testing.T, ns string, template *corev1.PodTemplateSpec) canary {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cluster.Config())
	require.NoError(t, err)
	r := argoRollout(ns, "web", map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true", revisions.OptInAnnotation: "true"})
	if template != nil {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(template)
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedField(r.Object, u, "spec", "template"))
	}
	require.NoError(t, unstructured.SetNestedField(r.Object, int64(2), "spec", "replicas"))
	require.NoError(t, unstructured.SetNestedSlice(r.Object, []any{map[string]any{"setWeight": int64(50)}, map[string]any{"pause": map[string]any{}}}, "spec", "strategy", "canary", "steps"))
	rollouts := dyn.Resource(rolloutsResource).Namespace(ns)
	_, err = rollouts.Create(ctx(t), r, metav1.CreateOptions{})
	require.NoError(t, err)
	status := func(patch string) {
		_, err := rollouts.Patch(ctx(t), "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
		require.NoError(t, err)
	}
	return canary{
		revision: func() string {
			u, err := rollouts.Get(ctx(t), "web", metav1.GetOptions{})
			require.NoError(t, err)
			v, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", rollout.InputsHashAnnotation)
			return v
		},
		promote: func() { status(`{"status":{"pauseConditions":null}}`) },
		abort:   func() { status(`{"status":{"abort":true}}`) },
	}
}

// wave stopped, its webhook gone: a scale-up still starts pods (failurePolicy Ignore), on the
// live objects; wave started again says so, once for each such pod.
func TestRevisionsScaleUpWithWaveStoppedStartsPodsOnTheLiveConfig(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	p := startWaveWithWebhook(t, client, ns)
	createCM(t, client, ns, "app", map[string]string{"k": "v1"})
	d := deployment(ns, "web", withEnvKey("app", "k"))
	d.Annotations[revisions.OptInAnnotation] = "true"
	createDeployment(t, client, d)
	require.Eventually(t, func() bool { return revisions.IsRevision(inputsHash(getDeployment(t, client, ns, "web"))) }, eventually, tick)
	rev := inputsHash(getDeployment(t, client, ns, "web"))
	snap := index(t, client, ns, rev)["configmap.app"]
	assert.Equal(t, snap, podOf(t, client, ns, rev).Spec.Containers[0].Env[0].ValueFrom.ConfigMapKeyRef.Name)
	require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, "web", eventually))

	p.Stop(5 * time.Second)
	_, err := client.AppsV1().Deployments(ns).Patch(ctx(t), "web", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, "web", time.Minute), "the scale-up waits for nothing")
	pods, err := client.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{})
	require.NoError(t, err)
	live := 0
	for _, pod := range pods.Items {
		if pod.Spec.Containers[0].Env[0].ValueFrom.ConfigMapKeyRef.Name == "app" {
			live++
		}
	}
	assert.Equal(t, 2, live, "the two pods made while wave was down read the live object")

	// wave back (its webhook served): it says so, once per pod, on the workload.
	ca := testcerts.NewCA(t, "webhook-ca-again")
	dir := t.TempDir()
	crt, key := ca.Server(t, "configwave-wave.configwave-system.svc")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600))
	startWave(t, ns, "--revisions-webhook-address="+testcluster.FreeAddr(t), "--revisions-webhook-cert-dir="+dir)
	require.Eventually(t, func() bool { return len(events(t, client, ns, "web", "ConfigRevisionLive")) == 2 }, eventually, tick,
		"an Event for each pod that reads live")
	for _, e := range events(t, client, ns, "web", "ConfigRevisionLive") {
		assert.Equal(t, corev1.EventTypeWarning, e.Type)
		assert.Regexp(t, `^pod web-[a-z0-9]+-[a-z0-9]+ of revision `+rev+` reads configmap/app live, not its snapshots: wave's webhook did not answer when the pod was made`, e.Message)
	}
}

// `kubectl replace` of a workload with revisions on, from a file without wave's template
// annotation (the user's own manifest, or one read back and edited), is no undo: wave does not
// hold it and report a rollback; it rolls the template onto the current config's revision, so
// that its pods read snapshots again.
func TestRevisionsReplaceWithoutWavesAnnotationIsNoUndo(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "app", map[string]string{"k": "v1"})
	p := startWave(t, ns)
	manifest := deployment(ns, "web",
		withVolume(corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("app")}}}))
	manifest.Annotations[revisions.OptInAnnotation] = "true"
	createDeployment(t, client, manifest.DeepCopy())
	require.Eventually(t, func() bool { return revisions.IsRevision(inputsHash(getDeployment(t, client, ns, "web"))) }, eventually, tick)
	v1 := inputsHash(getDeployment(t, client, ns, "web"))
	settle(t, p)

	// kubectl rollout undo to the revision from before revisions were on, which has no
	// annotation of wave's either: that is an undo, and held.
	undoDeployment(t, client, ns, "web")
	require.Eventually(t, func() bool { return len(events(t, client, ns, "web", "ConfigRolledBack")) == 1 }, eventually, tick, "the undo is held")
	assert.Contains(t, events(t, client, ns, "web", "ConfigRolledBack")[0].Message, "from before its revisions were on")
	assert.Empty(t, inputsHash(getDeployment(t, client, ns, "web")))

	for _, c := range []struct {
		name    string
		said    string // the reason of the Event that says why it rolls
		replace func(stored *appsv1.Deployment) *appsv1.Deployment
	}{
		// Every mark of wave's is gone with the file's metadata: as a workload seen anew.
		{"the user's own manifest", "ConfigRevisionsOn", func(stored *appsv1.Deployment) *appsv1.Deployment {
			d := manifest.DeepCopy() // no resourceVersion: kubectl replace puts it unconditionally
			d.Spec.Template.Spec.Containers[0].Image = "example.invalid/app:2"
			return d
		}},
		{"read back, wave's template annotation dropped", "ConfigChanged", func(stored *appsv1.Deployment) *appsv1.Deployment {
			d := stored.DeepCopy()
			delete(d.Spec.Template.Annotations, rollout.InputsHashAnnotation)
			d.Spec.Template.Spec.Containers[0].Image = "example.invalid/app:3"
			return d
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
				_, err := client.AppsV1().Deployments(ns).Update(ctx(t), c.replace(getDeployment(t, client, ns, "web")), metav1.UpdateOptions{})
				return err
			}))
			require.Eventually(t, func() bool { return inputsHash(getDeployment(t, client, ns, "web")) == v1 }, eventually, tick,
				"wave puts the current config's revision back on the replaced template")
			d := getDeployment(t, client, ns, "web")
			assert.Equal(t, v1, d.Labels[revisions.RevisionLabel])
			assert.Contains(t, d.Spec.Template.Spec.Containers[0].Image, "example.invalid/app:", "the replace's own change stays")
			settle(t, p)
			assert.Len(t, events(t, client, ns, "web", "ConfigRolledBack"), 1, "a replace is no undo")
			assert.Zero(t, p.Metric("configwave_wave_workloads_held_by_rollback"))
			if c.said == "ConfigChanged" {
				replaced := events(t, client, ns, "web", c.said)
				require.NotEmpty(t, replaced)
				assert.Contains(t, replaced[len(replaced)-1].Message, "no undo")
			} else {
				said := int32(0)
				for _, e := range events(t, client, ns, "web", c.said) {
					said += max(e.Count, 1)
				}
				assert.Equal(t, int32(2), said, "turned on, and on again once replaced")
			}
		})
	}
}
