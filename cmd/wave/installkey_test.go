package main

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/installkey"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// Upgrading to the install key: records written with unkeyed digests are adopted without a
// rollout, the new records test no guess of a Secret value, Wave's hash stays Wave's, and the
// next change rolls once.
func TestInstallKeyAdoptsUnkeyedRecordsWithoutRollout(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	const guess = "hunter2-installkey"
	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	createSecret(t, client, ns, "sec", map[string]string{"p": guess})
	d := deployment(ns, "app", withEnvKey("cm", "a"), func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = append(s.Containers[0].EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("sec")}})
	})
	createDeployment(t, client, d)

	// Before: unkeyed digests. Anyone who can read the Deployment can check a guess.
	old := startWave(t, ns, "--install-key-secret=")
	unkeyed := waitRecorded(t, client, ns, "app").Annotations[rollout.InputsAnnotation]
	require.NotContains(t, unkeyed, "key=")
	guessed := confighash.InputsOf(ns, podrefs.Uses{{Kind: configref.Secret, Namespace: ns, Name: "sec"}: {AllKeys: true}},
		func(configref.Ref) (map[string]string, bool) {
			dg, _ := confighash.Digest(&corev1.Secret{Data: map[string][]byte{"p": []byte(guess)}})
			return confighash.KeyDigests(dg), true
		})
	require.Contains(t, unkeyed, guessed.Value, "the oracle this closes: a guess's digest matches the record")
	settle(t, old)
	old.Stop(15 * time.Second)

	p := startWave(t, ns, "--install-key-secret="+ns+"/configwave-install-key")
	var keyed string
	require.Eventually(t, func() bool {
		keyed = getDeployment(t, client, ns, "app").Annotations[rollout.InputsAnnotation]
		return strings.HasPrefix(keyed, "key=")
	}, eventually, tick, "the record is adopted under the install key")
	settle(t, p)
	assert.Len(t, replicaSets(t, client, ns, "app"), 1, "adoption rolls nothing")
	assert.NotContains(t, keyed, guessed.Value, "a guess's unkeyed digest no longer matches")
	s, err := client.CoreV1().Secrets(ns).Get(ctx(t), "configwave-install-key", metav1.GetOptions{})
	require.NoError(t, err, "wave made the install key")
	assert.Len(t, s.Data[installkey.DataKey], installkey.Size)
	assert.True(t, *s.Immutable)
	assert.Contains(t, p.Log(), `keyedInputs=true`)

	patchCM(t, client, ns, "cm", `{"data":{"a":"2"}}`)
	require.Eventually(t, func() bool {
		cur := getDeployment(t, client, ns, "app")
		used := podrefs.Extract(ns, cur.Annotations, &cur.Spec.Template.Spec)
		want, err := confighash.WaveHash(confighash.HashWave, used.Wave, func(r configref.Ref) (any, error) {
			if r.Kind == configref.Secret {
				return client.CoreV1().Secrets(r.Namespace).Get(ctx(t), r.Name, metav1.GetOptions{})
			}
			return client.CoreV1().ConfigMaps(r.Namespace).Get(ctx(t), r.Name, metav1.GetOptions{})
		})
		require.NoError(t, err)
		return cur.Spec.Template.Annotations[podrefs.ConfigHashAnnotation] == want && want != ""
	}, eventually, tick, "the template carries Wave's own (unkeyed) hash of the new config")
	settle(t, p)
	assert.Len(t, replicaSets(t, client, ns, "app"), 2, "the next change rolls once")
	p.Stop(15 * time.Second)

	again := startWave(t, ns, "--install-key-secret="+ns+"/configwave-install-key")
	settle(t, again)
	assert.Len(t, replicaSets(t, client, ns, "app"), 2, "a restart reads the same key and rolls nothing")
	assert.Zero(t, again.Metric(`configwave_wave_reconciles_total{result="baseline"}`))
	for _, l := range []string{old.Log(), p.Log(), again.Log()} {
		assert.NotContains(t, l, guess)
	}
}

// An install key that cannot be had fails closed: wave exits with an error that names the
// Secret and what to do, and writes nothing. Before, it went on with unkeyed digests and
// rewrote every record.
func TestInstallKeyUnusableFailsClosed(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	_, err := client.CoreV1().Secrets(ns).Create(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "short-key"},
		Data: map[string][]byte{installkey.DataKey: []byte("abc")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	createDeployment(t, client, deployment(ns, "app", withEnvKey("cm", "a")))

	p := testcluster.StartProcess(t, waveBin, nil, "--kubeconfig="+cluster.Kubeconfig(), "--namespaces="+ns,
		"--listen-address="+testcluster.FreeAddr(t), "--install-key-secret="+ns+"/short-key")
	assert.NotZero(t, p.Wait(t, 30*time.Second), "wave exits")
	assert.Contains(t, p.Log(), "install key "+ns+"/short-key")
	assert.Contains(t, p.Log(), "wave writes nothing without it")
	assert.Empty(t, getDeployment(t, client, ns, "app").Annotations[rollout.InputsAnnotation], "no record written")
}

// A workload with no Wave hash when wave first sees it has nothing to stay compatible with:
// its hash is keyed under the install key, so a reader of the Deployment cannot test guesses
// of a Secret's value against it. A workload adopted with Wave's hash keeps Wave's own.
func TestNewWorkloadGetsAKeyedHash(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	const guess = "hunter2-keyedhash"
	createSecret(t, client, ns, "sec", map[string]string{"p": guess})
	mod := func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("sec")}}}
	}
	fresh := deployment(ns, "fresh", mod)
	createDeployment(t, client, fresh)
	fromWave := deployment(ns, "from-wave", mod)
	sec, err := client.CoreV1().Secrets(ns).Get(ctx(t), "sec", metav1.GetOptions{})
	require.NoError(t, err)
	uses := podrefs.Extract(ns, fresh.Annotations, &fresh.Spec.Template.Spec).Wave
	wavesOwn := func(s *corev1.Secret) string {
		h, err := confighash.WaveHash(confighash.HashWave, uses, func(configref.Ref) (any, error) { return s, nil })
		require.NoError(t, err)
		return h
	}
	fromWave.Spec.Template.Annotations = map[string]string{podrefs.ConfigHashAnnotation: wavesOwn(sec)}
	createDeployment(t, client, fromWave)

	p := startWave(t, ns, "--install-key-secret="+ns+"/configwave-install-key")
	for _, name := range []string{"fresh", "from-wave"} {
		waitRecorded(t, client, ns, name)
	}
	assert.Contains(t, getDeployment(t, client, ns, "fresh").Annotations[rollout.InputsAnnotation], ",hash=keyed", "the record says its hash is keyed")
	assert.NotContains(t, getDeployment(t, client, ns, "from-wave").Annotations[rollout.InputsAnnotation], "hash=keyed")

	_, err = client.CoreV1().Secrets(ns).Patch(ctx(t), "sec", types.MergePatchType, []byte(`{"stringData":{"p":"`+guess+`-2"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	sec, err = client.CoreV1().Secrets(ns).Get(ctx(t), "sec", metav1.GetOptions{})
	require.NoError(t, err)
	key, err := client.CoreV1().Secrets(ns).Get(ctx(t), "configwave-install-key", metav1.GetOptions{})
	require.NoError(t, err)
	keyed, err := confighash.KeyedWaveHash(confighash.HashWave, key.Data[installkey.DataKey], uses, func(configref.Ref) (any, error) { return sec, nil })
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return getDeployment(t, client, ns, "fresh").Spec.Template.Annotations[podrefs.ConfigHashAnnotation] == keyed &&
			getDeployment(t, client, ns, "from-wave").Spec.Template.Annotations[podrefs.ConfigHashAnnotation] == wavesOwn(sec)
	}, eventually, tick, "the new workload's hash is keyed; the adopted one's is Wave's own")
	assert.NotEqual(t, wavesOwn(sec), keyed, "a guess's plain hash does not match the new workload's")
	settle(t, p)
	assert.Len(t, replicaSets(t, client, ns, "fresh"), 2, "one rollout")
	assert.Len(t, replicaSets(t, client, ns, "from-wave"), 2)
	assert.NotContains(t, p.Log(), guess)
}

// Where the install key's Secret is absent and wave may not create Secrets (a peer's RBAC),
// wave runs without a key and its records test no guess: each Secret is recorded by its uid and
// resourceVersion, a workload that had no Wave hash gets a hash made from its record, and any
// write to the Secret, even of its metadata alone, rolls it once. Nothing is kept anywhere but
// a Secret. Once an admin creates the Secret, the next start keys the records, rolling nothing.
func TestInstallKeyAbsentRecordsSecretsByMetadata(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	const guess = "hunter2-bymeta"
	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	createSecret(t, client, ns, "sec", map[string]string{"p": guess})
	createDeployment(t, client, deployment(ns, "app", withEnvKey("cm", "a"), func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = append(s.Containers[0].EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("sec")}})
	}))
	// Wave's chart's and Stakater Reloader's charts' lot: read Secrets, create none.
	kubeconfig := roleKubeconfig(t, client, ns, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "peer-rbac"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},                                 // as Stakater Reloader's chart 2.2 and later
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}}, // as Wave's chart
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}})
	start := func(want string) *testcluster.Process {
		var p *testcluster.Process
		require.Eventually(t, func() bool { // RBAC reaches the authorizer's cache in a moment
			var ready bool
			p, ready = tryStartWave(t, ns, "--kubeconfig="+kubeconfig, "--crash-loop-detection=false", "--install-key-secret="+ns+"/configwave-install-key")
			if ready && strings.Contains(p.Log(), `records="`+want+`"`) {
				return true
			}
			p.Stop(15 * time.Second)
			return false
		}, eventually, 500*time.Millisecond)
		return p
	}

	p := start(string(installkey.ModeSecretsByMetadata))
	assert.Contains(t, p.Log(), "no install key: Secret "+ns+"/configwave-install-key is absent and wave may not create Secrets in "+ns+
		"; records of Secrets carry their uid and resourceVersion, not digests of their values, so any write to a Secret rolls the workloads that use it")
	assert.Contains(t, p.Log(), "kubectl -n "+ns+" create secret generic configwave-install-key --from-literal=key=")
	assert.Equal(t, 1.0, p.Metric(`configwave_wave_records_info{mode="secrets-by-metadata"}`))
	record := waitRecorded(t, client, ns, "app").Annotations[rollout.InputsAnnotation]
	require.True(t, strings.HasPrefix(record, "secrets=meta,hash=inputs,"), record)
	guessed := confighash.InputsOf(ns, podrefs.Uses{{Kind: configref.Secret, Namespace: ns, Name: "sec"}: {AllKeys: true}},
		func(configref.Ref) (map[string]string, bool) {
			dg, _ := confighash.Digest(&corev1.Secret{Data: map[string][]byte{"p": []byte(guess)}})
			return confighash.KeyDigests(dg), true
		})
	assert.NotContains(t, record, guessed.Objects["secret/sec"], "a right guess's digest is not in the record")
	for _, kind := range []string{"configmaps", "leases", "secrets"} {
		var err error
		switch kind {
		case "configmaps":
			_, err = client.CoreV1().ConfigMaps(ns).Get(ctx(t), "configwave-install-key", metav1.GetOptions{})
		case "leases":
			_, err = client.CoordinationV1().Leases(ns).Get(ctx(t), "configwave-install-key", metav1.GetOptions{})
		default:
			_, err = client.CoreV1().Secrets(ns).Get(ctx(t), "configwave-install-key", metav1.GetOptions{})
		}
		assert.True(t, apierrors.IsNotFound(err), "no key kept in %s, where RBAC let wave create them", kind)
	}
	settle(t, p)
	require.Len(t, replicaSets(t, client, ns, "app"), 1, "recording rolls nothing")

	// A metadata-only write rolls: the record cannot tell it from a new value, which is the price.
	patchSecret(t, client, ns, "sec", `{"metadata":{"labels":{"touched":"yes"}}}`)
	waitTemplateHashChange(t, client, ns, "app", "")
	settle(t, p)
	assert.Len(t, replicaSets(t, client, ns, "app"), 2, "one rollout")
	d := getDeployment(t, client, ns, "app")
	_, own, inputs := confighash.SplitRecord(d.Annotations[rollout.InputsAnnotation])
	require.True(t, own)
	assert.Equal(t, confighash.HashOfInputs(inputs), d.Spec.Template.Annotations[podrefs.ConfigHashAnnotation], "the template's hash is made from the record")
	used := podrefs.Extract(ns, d.Annotations, &d.Spec.Template.Spec)
	wavesFormula, err := confighash.WaveHash(confighash.HashWave, used.Wave, func(r configref.Ref) (any, error) {
		if r.Kind == configref.Secret {
			return client.CoreV1().Secrets(r.Namespace).Get(ctx(t), r.Name, metav1.GetOptions{})
		}
		return client.CoreV1().ConfigMaps(r.Namespace).Get(ctx(t), r.Name, metav1.GetOptions{})
	})
	require.NoError(t, err)
	assert.NotEqual(t, wavesFormula, d.Spec.Template.Annotations[podrefs.ConfigHashAnnotation], "not Wave's formula of the data: no oracle")
	p.Stop(15 * time.Second)

	// The admin makes the key: the next start keys every record, and nothing rolls.
	key := make([]byte, installkey.Size)
	for i := range key {
		key[i] = byte(7 * i)
	}
	_, err = client.CoreV1().Secrets(ns).Create(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "configwave-install-key"},
		Data: map[string][]byte{installkey.DataKey: key}}, metav1.CreateOptions{})
	require.NoError(t, err)
	keyed := start(string(installkey.ModeKeyed))
	require.Eventually(t, func() bool {
		return strings.HasPrefix(getDeployment(t, client, ns, "app").Annotations[rollout.InputsAnnotation], "key="+confighash.KeyID(key)+",hash=keyed,")
	}, eventually, tick, "the record is adopted under the key; the hash stays wave's own")
	settle(t, keyed)
	assert.Len(t, replicaSets(t, client, ns, "app"), 2, "adoption rolls nothing")

	patchSecret(t, client, ns, "sec", `{"stringData":{"p":"`+guess+`-2"}}`)
	require.Eventually(t, func() bool {
		d := getDeployment(t, client, ns, "app")
		used := podrefs.Extract(ns, d.Annotations, &d.Spec.Template.Spec)
		want, err := confighash.KeyedWaveHash(confighash.HashWave, key, used.Wave, func(r configref.Ref) (any, error) {
			if r.Kind == configref.Secret {
				return client.CoreV1().Secrets(r.Namespace).Get(ctx(t), r.Name, metav1.GetOptions{})
			}
			return client.CoreV1().ConfigMaps(r.Namespace).Get(ctx(t), r.Name, metav1.GetOptions{})
		})
		require.NoError(t, err)
		return d.Spec.Template.Annotations[podrefs.ConfigHashAnnotation] == want
	}, eventually, tick, "the next change rolls to the keyed hash")
	settle(t, keyed)
	assert.Len(t, replicaSets(t, client, ns, "app"), 3, "once")
	for _, l := range []string{p.Log(), keyed.Log()} {
		assert.NotContains(t, l, guess)
	}
}

// A ResourceQuota on Secrets refuses the install key's Secret with 403, where RBAC allows it:
// wave waits, alive and not ready, says which quota refused it and what to do, and makes the
// key once there is room. Before, the 403 counted as RBAC's and the key went to a ConfigMap.
func TestInstallKeyWaitsOutAQuota(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	// The test cluster runs no quota controller: the test writes the quota's status as it would,
	// first as in a new namespace (limits known, usage not yet counted), then counted.
	quota := func(hard string, counted bool) {
		q, err := client.CoreV1().ResourceQuotas(ns).Get(ctx(t), "secrets-cap", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			q, err = client.CoreV1().ResourceQuotas(ns).Create(ctx(t), &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "secrets-cap"}}, metav1.CreateOptions{})
		}
		require.NoError(t, err)
		q.Spec.Hard = corev1.ResourceList{"count/secrets": resource.MustParse(hard)}
		q, err = client.CoreV1().ResourceQuotas(ns).Update(ctx(t), q, metav1.UpdateOptions{})
		require.NoError(t, err)
		q.Status.Hard, q.Status.Used = q.Spec.Hard, nil
		if counted {
			q.Status.Used = corev1.ResourceList{"count/secrets": resource.MustParse("0")}
		}
		_, err = client.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx(t), q, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	quota("0", false)
	addr := testcluster.FreeAddr(t)
	p := testcluster.StartProcess(t, waveBin, nil, "--kubeconfig="+cluster.Kubeconfig(), "--namespaces="+ns, "--listen-address="+addr,
		"--install-key-secret="+ns+"/configwave-install-key")
	p.Addr = addr
	refused := func(why string) {
		t.Helper()
		require.Eventually(t, func() bool {
			return strings.Contains(p.Log(), `refusedBy="ResourceQuota secrets-cap (`+why+`)"`) || p.Exited()
		}, eventually, tick, p.Log())
		require.False(t, p.Exited(), p.Log())
	}
	refused("status unknown for quota")
	quota("0", true)
	refused("exceeded quota")
	assert.Contains(t, p.Log(), "raise the quota's count/secrets")
	assert.Contains(t, p.Log(), "create the Secret yourself: kubectl -n "+ns+" create secret generic configwave-install-key")
	code, body := p.Get("/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "waiting for the install key, Secret "+ns+"/configwave-install-key")
	code, _ = p.Get("/healthz")
	assert.Equal(t, http.StatusOK, code, "alive while it waits: a liveness probe does not restart it")
	_, err := client.CoreV1().ConfigMaps(ns).Get(ctx(t), "configwave-install-key", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no key kept elsewhere")

	quota("5", true)
	p.WaitReady(t)
	s, err := client.CoreV1().Secrets(ns).Get(ctx(t), "configwave-install-key", metav1.GetOptions{})
	require.NoError(t, err, "made once the quota had room")
	assert.Contains(t, p.Log(), `records="keyed"`)
	assert.NotContains(t, p.Log(), base64.StdEncoding.EncodeToString(s.Data[installkey.DataKey]))
}
