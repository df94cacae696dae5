package manifests_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/autorollback"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/waveclient"
)

// config/wave-revisions, applied for real: wave's ServiceAccount may add an owner reference to
// a snapshot it made, and the API server refuses every other write of it to a ConfigMap or
// Secret, although its RBAC grants patch on all of them; and it may delete only a pod that a
// StatefulSet controls and that is not ready, although its RBAC grants delete on every pod.
func TestRevisionsPolicyLetsWaveOnlyAddOwnersToItsSnapshots(t *testing.T) {
	testcluster.Need(t, cluster)
	admin, err := kubernetes.NewForConfig(cluster.Config())
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cluster.Config())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, o := range decode(t, kustomize(t, "config/wave-revisions")) {
		gvr := map[string]string{"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
			"ValidatingAdmissionPolicy": "validatingadmissionpolicies", "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}[o.GetKind()]
		require.NotEmpty(t, gvr, "a kind the test does not expect: %s", o.GetKind())
		gv := o.GroupVersionKind().GroupVersion()
		ri := dyn.Resource(gv.WithResource(gvr))
		_, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "configwave-manifest-test", Force: true})
		require.NoError(t, err, "%s %s", o.GetKind(), o.GetName())
		t.Cleanup(func() { _ = ri.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{}) })
	}
	ns := testcluster.Namespace(t, admin)
	immutable := true
	snapshot, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-0123456789",
		Labels: map[string]string{revisions.ManagedByLabel: revisions.ManagedBy}}, Immutable: &immutable, Data: map[string][]byte{"pw": []byte("one")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Data: map[string][]byte{"pw": []byte("one")}}, metav1.CreateOptions{})
	require.NoError(t, err)

	asWave := rest.CopyConfig(cluster.Config())
	asWave.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:configwave-system:configwave-wave",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:configwave-system", "system:authenticated"}}
	wave, err := kubernetes.NewForConfig(asWave)
	require.NoError(t, err)
	// A revision that exists (an owner that does not would have the garbage collector delete
	// the snapshot at once): any object of the namespace serves.
	rev, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	owner, err := revisions.OwnerPatch(snapshot.OwnerReferences, revisions.Owner{APIVersion: "v1", Kind: "ConfigMap", Name: rev.Name, UID: rev.UID})
	require.NoError(t, err)

	// The policy reaches the API server's admission a moment after it is created.
	// Until then a write is refused by nothing, or by RBAC not yet in force: tried on a Secret
	// of the same content, so that a write let through changes nothing.
	_, err = admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Data: map[string][]byte{"pw": []byte("one")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := wave.CoreV1().Secrets(ns).Patch(ctx, "probe", types.MergePatchType, []byte(`{"data":{"pw":"b25l"}}`), metav1.PatchOptions{})
		return err != nil && strings.Contains(err.Error(), "wave may write only the immutable snapshots and indexes it made")
	}, time.Minute, 200*time.Millisecond, "the policy never refused a write of wave to a Secret it did not make")
	_, err = wave.CoreV1().Secrets(ns).Patch(ctx, "db", types.MergePatchType, []byte(`{"data":{"pw":"dHdv"}}`), metav1.PatchOptions{})
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "wave may write only the immutable snapshots and indexes it made")
	got, err := admin.CoreV1().Secrets(ns).Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []byte("one"), got.Data["pw"], "the Secret is as it was")

	_, err = wave.CoreV1().Secrets(ns).Patch(ctx, snapshot.Name, types.StrategicMergePatchType, owner, metav1.PatchOptions{})
	require.NoError(t, err, "an owner reference added to wave's snapshot")
	_, err = wave.CoreV1().Secrets(ns).Patch(ctx, snapshot.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":null}}}`), metav1.PatchOptions{})
	require.Error(t, err, "its labels are not wave's to change")
	assert.Contains(t, err.Error(), "wave may only add owner references to its snapshots")
	_, err = wave.CoreV1().Secrets(ns).Patch(ctx, snapshot.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"x":"y"}}}`), metav1.PatchOptions{})
	require.Error(t, err, "nor its annotations")
	_, err = wave.CoreV1().Secrets(ns).Patch(ctx, snapshot.Name, types.MergePatchType, []byte(`{"metadata":{"ownerReferences":null}}`), metav1.PatchOptions{})
	require.Error(t, err, "nor take an owner away (the garbage collector would delete what a revision still uses)")
	assert.Contains(t, err.Error(), "wave may only add owner references to its snapshots")
	repointed := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":%q}]}}`, rev.UID)
	_, err = wave.CoreV1().Secrets(ns).Patch(ctx, snapshot.Name, types.MergePatchType, []byte(repointed), metav1.PatchOptions{})
	require.Error(t, err, "nor point an owner at another name (the garbage collector would find it gone and delete the snapshot)")
	assert.Contains(t, err.Error(), "wave may only add owner references to its snapshots")
	got, err = admin.CoreV1().Secrets(ns).Get(ctx, snapshot.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, got.OwnerReferences, 1)
	assert.Equal(t, "web-1", got.OwnerReferences[0].Name)
	assert.Equal(t, revisions.ManagedBy, got.Labels[revisions.ManagedByLabel])

	// What wave itself makes goes through: the snapshots of a ConfigMap and a TLS Secret, and
	// their index, as revisions.Ensure makes them, as wave.
	app, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tls, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	long, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("long-name.", 24) + "end"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	require.NoError(t, err, "a ConfigMap whose snapshot's name is cut to fit")
	waveClient, err := waveclient.New(asWave)
	require.NoError(t, err)
	adminClient, err := waveclient.New(cluster.Config())
	require.NoError(t, err)
	// wave reads through config/wave's rules, which this test does not apply: it reads as admin
	// and creates as wave.
	made, err := revisions.Ensure(ctx, readsAs{revisions.ClientAPI{Core: adminClient.CoreV1()}, revisions.ClientAPI{Core: waveClient.CoreV1()}}, confighash.Digester{Key: []byte("0123456789abcdef0123456789abcdef")}, ns, revisions.InputsHash("made"),
		[]revisions.Source{{Ref: configref.Ref{Kind: configref.ConfigMap, Namespace: ns, Name: "app"}, ResourceVersion: app.ResourceVersion},
			{Ref: configref.Ref{Kind: configref.Secret, Namespace: ns, Name: "tls"}, ResourceVersion: tls.ResourceVersion},
			{Ref: configref.Ref{Kind: configref.ConfigMap, Namespace: ns, Name: long.Name}, ResourceVersion: long.ResourceVersion}})
	require.NoError(t, err, "wave's own snapshots (one of a name cut to fit) and index, through the policy")
	assert.Len(t, made, 3)

	// Creates: only its own kind of snapshot; never a token for another ServiceAccount.
	managed := map[string]string{revisions.ManagedByLabel: revisions.ManagedBy}
	snapshotOf := func(source, content string) map[string]string {
		return map[string]string{revisions.SnapshotOfAnnotation: source, revisions.ContentAnnotation: content}
	}
	index := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "configwave-" + revisions.InputsHash("web"), Labels: managed,
		Annotations: map[string]string{revisions.ContentAnnotation: revisions.InputsHash("web")}}, Immutable: &immutable}
	_, err = wave.CoreV1().ConfigMaps(ns).Create(ctx, index, metav1.CreateOptions{})
	assert.NoError(t, err, "an index")
	index.Name = "configwave-other"
	_, err = wave.CoreV1().ConfigMaps(ns).Create(ctx, index, metav1.CreateOptions{})
	assert.ErrorContains(t, err, "wave may create only", "an index named otherwise")
	for _, tc := range []struct {
		name   string
		secret *corev1.Secret
		ok     bool
	}{
		{"a snapshot", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-abcdef0123", Labels: managed, Annotations: snapshotOf("db", "abcdef0123")}, Immutable: &immutable}, true},
		{"a TLS snapshot", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls-abcdef0123", Labels: managed, Annotations: snapshotOf("tls", "abcdef0123")}, Immutable: &immutable,
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": nil, "tls.key": nil}}, true},
		{"a snapshot of a Secret kept out of backups, which its copies are too", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-abcdef0124",
			Labels: map[string]string{revisions.ManagedByLabel: revisions.ManagedBy, "velero.io/exclude-from-backup": "true"}, Annotations: snapshotOf("db", "abcdef0124")}, Immutable: &immutable}, true},
		{"the backup label with another value", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-abcdef0125",
			Labels: map[string]string{revisions.ManagedByLabel: revisions.ManagedBy, "velero.io/exclude-from-backup": "no"}, Annotations: snapshotOf("db", "abcdef0125")}, Immutable: &immutable}, false},
		{"a Secret that is not a snapshot", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "anything"}}, false},
		{"a mutable one labelled as a snapshot", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-mutable", Labels: managed}}, false},
		{"a ServiceAccount token labelled as a snapshot", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token", Labels: managed,
			Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Immutable: &immutable, Type: corev1.SecretTypeServiceAccountToken}, false},
		// Shaped as a snapshot in every other way: a bootstrap token (in kube-system it would let
		// nodes join), an Argo CD cluster Secret or a Grafana datasource (which their sidecars
		// load by label), a name that is not the one its annotations give.
		{"a bootstrap token shaped as a snapshot", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-abcdef0123", Labels: managed,
			Annotations: snapshotOf("bootstrap-token", "abcdef0123")}, Immutable: &immutable, Type: corev1.SecretTypeBootstrapToken}, false},
		{"an Argo CD cluster Secret shaped as a snapshot", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cluster-abcdef0123",
			Labels: map[string]string{revisions.ManagedByLabel: revisions.ManagedBy, "argocd.argoproj.io/secret-type": "cluster"}, Annotations: snapshotOf("cluster", "abcdef0123")}, Immutable: &immutable}, false},
		{"a name its annotations do not give", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-abcdef", Labels: managed,
			Annotations: snapshotOf("db", "abcdef0123")}, Immutable: &immutable}, false},
		{"another annotation", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-0000000000", Labels: managed,
			Annotations: map[string]string{revisions.SnapshotOfAnnotation: "db", revisions.ContentAnnotation: "0000000000", "kubernetes.io/service-account.name": "default"}}, Immutable: &immutable}, false},
	} {
		_, err := wave.CoreV1().Secrets(ns).Create(ctx, tc.secret, metav1.CreateOptions{})
		if tc.ok {
			assert.NoError(t, err, tc.name)
		} else {
			assert.ErrorContains(t, err, "wave may create only", tc.name)
		}
	}
	ensureNamespace(t, "configwave-system")
	_ = admin.CoreV1().Secrets("configwave-system").Delete(ctx, "configwave-install-key", metav1.DeleteOptions{})
	_, err = wave.CoreV1().Secrets("configwave-system").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "configwave-install-key"}, Data: map[string][]byte{"key": make([]byte, 32)}}, metav1.CreateOptions{})
	assert.False(t, err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy"), "its install key is not a snapshot, and is let through: %v", err)

	// Deletes of pods: only one a StatefulSet controls that is not ready, which wave deletes
	// after undoing an OrderedReady StatefulSet. Its pods on the kwok node are ready; those
	// of a set that no node takes stay pending.
	one := int32(1)
	revision := map[string]string{"configwave.io/config-inputs-hash": revisions.InputsHash("x")}
	set := func(name string, nodeSelector, annotations map[string]string) {
		labels := map[string]string{"app": name}
		_, err := admin.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.StatefulSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec:       corev1.PodSpec{NodeSelector: nodeSelector, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	set("ready", nil, revision)
	set("stuck", map[string]string{"no-such-node": "true"}, revision)
	set("starting", map[string]string{"no-such-node": "true"}, nil) // a database still starting, of no config revision
	_, err = admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lone", Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: "x"}},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"no-such-node": "true"}, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, "ready-0", metav1.GetOptions{})
		return err == nil && testcluster.PodReady(*p)
	}, time.Minute, 200*time.Millisecond, "the kwok node never made ready-0 ready")
	require.Eventually(t, func() bool {
		_, err := admin.CoreV1().Pods(ns).Get(ctx, "stuck-0", metav1.GetOptions{})
		_, err2 := admin.CoreV1().Pods(ns).Get(ctx, "starting-0", metav1.GetOptions{})
		return err == nil && err2 == nil
	}, time.Minute, 200*time.Millisecond, "stuck-0 and starting-0 were never created")
	for _, pod := range []string{"ready-0", "lone", "starting-0"} {
		err := wave.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{})
		assert.ErrorContains(t, err, "wave may delete only a pod of a config revision that a StatefulSet controls", pod)
		_, err = admin.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		assert.NoError(t, err, "%s is still there", pod)
	}
	assert.NoError(t, wave.CoreV1().Pods(ns).Delete(ctx, "stuck-0", metav1.DeleteOptions{}), "a StatefulSet's pod that is not ready")

	// An Argo Rollout: wave may abort it (rollback-on-failure), and change nothing else of its
	// status, though RBAC grants patch on rollouts/status.
	testcluster.InstallArgoRolloutsCRDs(t, cluster)
	rollouts := schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}
	rollout := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}}, "spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "app"}}}},
			"strategy": map[string]any{"canary": map[string]any{"steps": []any{map[string]any{"setWeight": int64(50)}, map[string]any{"pause": map[string]any{}}}}}}}}
	_, err = dyn.Resource(rollouts).Namespace(ns).Create(ctx, rollout, metav1.CreateOptions{})
	require.NoError(t, err)
	paused := []byte(`{"status":{"currentStepIndex":1,"pauseConditions":[{"reason":"CanaryPauseStep","startTime":"2026-01-01T00:00:00Z"}]}}`)
	_, err = dyn.Resource(rollouts).Namespace(ns).Patch(ctx, "web", types.MergePatchType, paused, metav1.PatchOptions{}, "status")
	require.NoError(t, err, "the canary paused at its step, as its controller writes it")
	waveDyn, err := dynamic.NewForConfig(asWave)
	require.NoError(t, err)
	statusOf := func() map[string]any {
		r, err := dyn.Resource(rollouts).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		st, _, _ := unstructured.NestedMap(r.Object, "status")
		return st
	}
	require.Eventually(t, func() bool { // the policy reaches admission for the new kind a moment later
		_, err := waveDyn.Resource(rollouts).Namespace(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"status":{"promoteFull":true}}`), metav1.PatchOptions{}, "status")
		if err == nil {
			_, err = dyn.Resource(rollouts).Namespace(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"status":{"promoteFull":null}}`), metav1.PatchOptions{}, "status")
			require.NoError(t, err)
			return false
		}
		return strings.Contains(err.Error(), "wave may only abort an Argo Rollout")
	}, time.Minute, 200*time.Millisecond, "the policy never refused wave a full promotion (the canary's steps and analysis skipped)")
	for what, patch := range map[string]string{
		"an abort that also resumes the canary": `{"status":{"abort":true,"pauseConditions":null}}`,
		"a step skipped":                        `{"status":{"currentStepIndex":2}}`,
	} {
		_, err := waveDyn.Resource(rollouts).Namespace(ns).Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
		require.Error(t, err, what)
		assert.Contains(t, err.Error(), "wave may only abort an Argo Rollout", what)
	}
	assert.Nil(t, statusOf()["abort"], "nothing of the refused writes reached the Rollout")
	r, err := dyn.Resource(rollouts).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	abort, err := autorollback.AbortPatchAt(r.GetResourceVersion())
	require.NoError(t, err)
	_, err = waveDyn.Resource(rollouts).Namespace(ns).Patch(ctx, "web", types.MergePatchType, abort, metav1.PatchOptions{}, "status")
	require.NoError(t, err, "wave's abort, as it sends it")
	assert.Equal(t, true, statusOf()["abort"])
}

// readsAs is a revisions.API that reads through one client and creates through another.
type readsAs struct{ reader, creator revisions.ClientAPI }

func (a readsAs) Get(ctx context.Context, ref configref.Ref) (metav1.Object, error) {
	return a.reader.Get(ctx, ref)
}

func (a readsAs) Create(ctx context.Context, kind configref.Kind, obj metav1.Object) (metav1.Object, error) {
	return a.creator.Create(ctx, kind, obj)
}
