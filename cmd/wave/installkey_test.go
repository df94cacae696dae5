package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configwave/configwave/internal/confighash"
	"github.com/configwave/configwave/internal/configref"
	"github.com/configwave/configwave/internal/installkey"
	"github.com/configwave/configwave/internal/refs"
	"github.com/configwave/configwave/internal/rollout"
	"github.com/configwave/configwave/internal/testcluster"
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
	guessed := confighash.InputsOf(ns, refs.Uses{{Kind: configref.Secret, Namespace: ns, Name: "sec"}: {AllKeys: true}},
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
		used := refs.Extract(ns, cur.Annotations, &cur.Spec.Template.Spec)
		want, err := confighash.WaveHash(confighash.HashWave, used.Wave, func(r configref.Ref) (any, error) {
			if r.Kind == configref.Secret {
				return client.CoreV1().Secrets(r.Namespace).Get(ctx(t), r.Name, metav1.GetOptions{})
			}
			return client.CoreV1().ConfigMaps(r.Namespace).Get(ctx(t), r.Name, metav1.GetOptions{})
		})
		require.NoError(t, err)
		return cur.Spec.Template.Annotations[refs.ConfigHashAnnotation] == want && want != ""
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
	uses := refs.Extract(ns, fresh.Annotations, &fresh.Spec.Template.Spec).Wave
	wavesOwn := func(s *corev1.Secret) string {
		h, err := confighash.WaveHash(confighash.HashWave, uses, func(configref.Ref) (any, error) { return s, nil })
		require.NoError(t, err)
		return h
	}
	fromWave.Spec.Template.Annotations = map[string]string{refs.ConfigHashAnnotation: wavesOwn(sec)}
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
		return getDeployment(t, client, ns, "fresh").Spec.Template.Annotations[refs.ConfigHashAnnotation] == keyed &&
			getDeployment(t, client, ns, "from-wave").Spec.Template.Annotations[refs.ConfigHashAnnotation] == wavesOwn(sec)
	}, eventually, tick, "the new workload's hash is keyed; the adopted one's is Wave's own")
	assert.NotEqual(t, wavesOwn(sec), keyed, "a guess's plain hash does not match the new workload's")
	settle(t, p)
	assert.Len(t, replicaSets(t, client, ns, "fresh"), 2, "one rollout")
	assert.Len(t, replicaSets(t, client, ns, "from-wave"), 2)
	assert.NotContains(t, p.Log(), guess)
}
