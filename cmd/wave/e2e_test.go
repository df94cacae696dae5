package main

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// These tests run the wave binary against the real control plane, whose Deployment,
// StatefulSet and DaemonSet controllers turn a template change into new ReplicaSets or
// ControllerRevisions, and whose kwok node runs the pods.

func ref(name string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: name} }

func withEnvKey(cm, key string) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Containers[0].Env = append(s.Containers[0].Env, corev1.EnvVar{Name: "V", ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref(cm), Key: key}}})
	}
}

func withVolume(v corev1.Volume) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Volumes = append(s.Volumes, v)
		s.Containers[0].VolumeMounts = append(s.Containers[0].VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: "/" + v.Name})
	}
}

func deployment(ns, name string, mods ...func(*corev1.PodSpec)) *appsv1.Deployment {
	d := optIn(testcluster.Deployment(ns, name, 1))
	for _, m := range mods {
		m(&d.Spec.Template.Spec)
	}
	return d
}

// Each way a pod can use config: creating the workload gives one ReplicaSet, a change of what
// the pods see gives exactly one more, and the rollout completes.
func TestEachReferenceTypeRollsOnceItChanges(t *testing.T) {
	client := adminClient(t)
	tests := []struct {
		name   string
		mod    func(*corev1.PodSpec)
		change func(t *testing.T, ns string)
	}{
		{name: "configMap volume", mod: withVolume(corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("cm")}}}),
			change: func(t *testing.T, ns string) { patchCM(t, client, ns, "cm", `{"data":{"a":"2"}}`) }},
		{name: "secret volume", mod: withVolume(corev1.Volume{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec"}}}),
			change: func(t *testing.T, ns string) { patchSecret(t, client, ns, "sec", `{"stringData":{"p":"2"}}`) }},
		{name: "projected configMap with items", mod: withVolume(corev1.Volume{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref("cm"), Items: []corev1.KeyToPath{{Key: "a", Path: "a"}}}}}}}}),
			change: func(t *testing.T, ns string) { patchCM(t, client, ns, "cm", `{"data":{"a":"2"}}`) }},
		{name: "env configMapKeyRef", mod: withEnvKey("cm", "a"),
			change: func(t *testing.T, ns string) { patchCM(t, client, ns, "cm", `{"data":{"a":"2"}}`) }},
		{name: "env secretKeyRef", mod: func(s *corev1.PodSpec) {
			s.Containers[0].Env = []corev1.EnvVar{{Name: "P", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: ref("sec"), Key: "p"}}}}
		}, change: func(t *testing.T, ns string) { patchSecret(t, client, ns, "sec", `{"stringData":{"p":"2"}}`) }},
		{name: "envFrom secret", mod: func(s *corev1.PodSpec) {
			s.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("sec")}}}
		}, change: func(t *testing.T, ns string) { patchSecret(t, client, ns, "sec", `{"stringData":{"new":"key"}}`) }},
		{name: "init container env (Wave misses it)", mod: func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "init", Image: "registry.invalid/init:1", Env: []corev1.EnvVar{{Name: "V", ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref("cm"), Key: "a"}}}}}}
		}, change: func(t *testing.T, ns string) { patchCM(t, client, ns, "cm", `{"data":{"a":"2"}}`) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := testcluster.Namespace(t, client)
			createCM(t, client, ns, "cm", map[string]string{"a": "1", "b": "1"})
			createSecret(t, client, ns, "sec", map[string]string{"p": "1"})
			p := startWave(t, ns)
			createDeployment(t, client, deployment(ns, "app", tt.mod))
			d := waitRecorded(t, client, ns, "app")
			require.Len(t, replicaSets(t, client, ns, "app"), 1, "creating an opted-in Deployment gives exactly one ReplicaSet")
			assert.Empty(t, d.Spec.Template.Annotations[podrefs.ConfigHashAnnotation], "nothing written to the template on create")

			const getSeries = `configwave_wave_api_requests_total{client="workloads",method="GET"}`
			gets := p.Metric(getSeries)
			tt.change(t, ns)
			d = waitTemplateHashChange(t, client, ns, "app", inputsHash(d))
			assert.Regexp(t, "^[0-9a-f]{64}$", d.Spec.Template.Annotations[podrefs.ConfigHashAnnotation])
			assert.Equal(t, gets, p.Metric(getSeries), "no read from the API on the hot path: wave keeps the data of the config a workload uses")
			settle(t, p)
			assert.Len(t, replicaSets(t, client, ns, "app"), 2, "one change gives exactly one more ReplicaSet")
			assert.EqualValues(t, 1, p.Metric(`configwave_wave_patches_total{kind="Deployment",type="rollout"}`))
			require.Eventually(t, func() bool { return len(events(t, client, ns, "app", "ConfigChanged")) > 0 }, eventually, tick)
			msg := events(t, client, ns, "app", "ConfigChanged")[0].Message
			assert.Contains(t, msg, "changed; rolling out")
			assert.NotContains(t, msg, "\"2\"")
		})
	}
}

func TestStatefulSetAndDaemonSetRoll(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	p := startWave(t, ns)
	d := deployment(ns, "x", withEnvKey("cm", "a"))
	podSpec := d.Spec.Template
	annotations := map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}

	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", Annotations: annotations},
		Spec: appsv1.StatefulSetSpec{Replicas: d.Spec.Replicas, ServiceName: "db", Selector: d.Spec.Selector, Template: podSpec}}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent", Annotations: annotations},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}, Template: podSpec}}
	ds.Spec.Template.Labels = map[string]string{"app": "agent"}
	sts.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
	sts.Spec.Template.Labels = map[string]string{"app": "db"}
	_, err := client.AppsV1().StatefulSets(ns).Create(ctx(t), sts, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.AppsV1().DaemonSets(ns).Create(ctx(t), ds, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s, err := client.AppsV1().StatefulSets(ns).Get(ctx(t), "db", metav1.GetOptions{})
		require.NoError(t, err)
		a, err := client.AppsV1().DaemonSets(ns).Get(ctx(t), "agent", metav1.GetOptions{})
		require.NoError(t, err)
		return s.Annotations[rollout.InputsAnnotation] != "" && a.Annotations[rollout.InputsAnnotation] != ""
	}, eventually, tick)
	require.Eventually(t, func() bool {
		return controllerRevisions(t, client, ns, map[string]string{"app": "db"}) == 1 && controllerRevisions(t, client, ns, map[string]string{"app": "agent"}) == 1
	}, eventually, tick)

	patchCM(t, client, ns, "cm", `{"data":{"a":"2"}}`)
	require.Eventually(t, func() bool {
		return controllerRevisions(t, client, ns, map[string]string{"app": "db"}) == 2 && controllerRevisions(t, client, ns, map[string]string{"app": "agent"}) == 2
	}, eventually, tick, "each kind's controller made a new revision")
	require.Eventually(t, func() bool {
		s, err := client.AppsV1().StatefulSets(ns).Get(ctx(t), "db", metav1.GetOptions{})
		require.NoError(t, err)
		a, err := client.AppsV1().DaemonSets(ns).Get(ctx(t), "agent", metav1.GetOptions{})
		require.NoError(t, err)
		return s.Status.UpdateRevision == s.Status.CurrentRevision && s.Status.UpdatedReplicas == 1 && s.Status.ReadyReplicas == 1 &&
			a.Status.UpdatedNumberScheduled == a.Status.DesiredNumberScheduled && a.Status.NumberReady == a.Status.DesiredNumberScheduled
	}, eventually, tick, "the rollouts complete")
	settle(t, p)
	assert.EqualValues(t, 1, p.Metric(`configwave_wave_patches_total{kind="StatefulSet",type="rollout"}`))
	assert.EqualValues(t, 1, p.Metric(`configwave_wave_patches_total{kind="DaemonSet",type="rollout"}`))
}

// Changes the pods cannot see roll nothing: another key, a key outside a volume's items, an
// unmounted volume, metadata, an unrelated ConfigMap, and resyncs.
func TestChangesThePodsCannotSeeRollNothing(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cm", map[string]string{"a": "1", "b": "1"})
	createCM(t, client, ns, "items", map[string]string{"a": "1", "b": "1"})
	createCM(t, client, ns, "unmounted", map[string]string{"a": "1"})
	createCM(t, client, ns, "unrelated", map[string]string{"a": "1"})
	p := startWave(t, ns, "--sync-period=2s")
	d := deployment(ns, "app", withEnvKey("cm", "a"),
		withVolume(corev1.Volume{Name: "it", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("items"), Items: []corev1.KeyToPath{{Key: "a", Path: "a"}}}}}))
	d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "nobody-mounts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("unmounted")}}})
	createDeployment(t, client, d)
	waitRecorded(t, client, ns, "app")
	require.Len(t, replicaSets(t, client, ns, "app"), 1)
	settle(t, p)
	// kube-controller-manager adds its own revision annotation a moment after the ReplicaSet:
	// compare against the Deployment once it has, or its write would look like ours.
	var before *appsv1.Deployment
	require.Eventually(t, func() bool {
		before = getDeployment(t, client, ns, "app")
		return before.Annotations["deployment.kubernetes.io/revision"] != ""
	}, eventually, tick)

	unchanged := p.Metric(`configwave_wave_reconciles_total{result="unchanged"}`)
	patchCM(t, client, ns, "cm", `{"data":{"b":"2"}}`)
	waitUnchangedAbove(t, p, unchanged) // wave looked, decided nothing changed
	patchCM(t, client, ns, "items", `{"data":{"b":"2"}}`)
	patchCM(t, client, ns, "unmounted", `{"data":{"a":"2"}}`)
	patchCM(t, client, ns, "unrelated", `{"data":{"a":"2"}}`)
	_, err := client.CoreV1().ConfigMaps(ns).Patch(ctx(t), "cm", types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	time.Sleep(5 * time.Second) // two resyncs
	settle(t, p)

	after := getDeployment(t, client, ns, "app")
	assert.Equal(t, before.Spec.Template.Annotations, after.Spec.Template.Annotations)
	assert.Equal(t, before.Generation, after.Generation, "zero writes on unrelated changes and resyncs")
	assert.Equal(t, before.Annotations, after.Annotations, "zero writes on unrelated changes and resyncs")
	assert.Len(t, replicaSets(t, client, ns, "app"), 1)
	assert.EqualValues(t, -1, p.Metric(`configwave_wave_patches_total{kind="Deployment",type="rollout"}`))
}

func TestSharedConfigMapRollsEveryUser(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "shared", map[string]string{"a": "1"})
	p := startWave(t, ns)
	const n = 5
	for i := range n {
		createDeployment(t, client, deployment(ns, fmt.Sprintf("app-%d", i), withEnvKey("shared", "a")))
	}
	createDeployment(t, client, testcluster.Deployment(ns, "not-opted-in", 1)) // never touched
	hashes := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("app-%d", i)
		hashes[name] = inputsHash(waitRecorded(t, client, ns, name))
	}
	patchCM(t, client, ns, "shared", `{"data":{"a":"2"}}`)
	for name, h := range hashes {
		waitTemplateHashChange(t, client, ns, name, h)
		assert.Len(t, replicaSets(t, client, ns, name), 2, name)
	}
	settle(t, p)
	other := getDeployment(t, client, ns, "not-opted-in")
	assert.NotContains(t, other.Annotations, rollout.InputsAnnotation, "a workload without the annotation is never written to")
	assert.EqualValues(t, n, p.Metric(`configwave_wave_patches_total{kind="Deployment",type="rollout"}`))
}

func TestExtraConfigMapsAndOptionalReferences(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "extra", map[string]string{"a": "1"})
	p := startWave(t, ns)
	d := deployment(ns, "app", func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("optional"), Optional: ptr(true)}}}
	})
	d.Annotations[podrefs.ExtraConfigMapsAnnotation] = "extra"
	createDeployment(t, client, d)
	before := waitRecorded(t, client, ns, "app")

	patchCM(t, client, ns, "extra", `{"data":{"a":"2"}}`)
	d1 := waitTemplateHashChange(t, client, ns, "app", inputsHash(before))
	require.Len(t, replicaSets(t, client, ns, "app"), 2)

	createCM(t, client, ns, "optional", map[string]string{"x": "1"}) // an optional reference appears
	waitTemplateHashChange(t, client, ns, "app", inputsHash(d1))
	settle(t, p)
	assert.Len(t, replicaSets(t, client, ns, "app"), 3)
}

func ptr[T any](v T) *T { return &v }

// Switching from Wave: a template hash Wave wrote on the current data is adopted without a
// rollout; a stale one (Wave was behind) rolls once.
func TestAdoptsWaveHashWithoutRollout(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "app-config", map[string]string{"key": "value"})
	createSecret(t, client, ns, "app-secret", map[string]string{"password": "s3cr3t"})
	mod := func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("app-config")}}, {SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("app-secret")}}}
	}
	current := deployment(ns, "current", mod)
	current.Spec.Template.Annotations = map[string]string{podrefs.ConfigHashAnnotation: "509f50320b71c3be0073e8a3287f839fedcb86af881fa801d7c2622bea259201"}
	stale := deployment(ns, "stale", mod)
	stale.Spec.Template.Annotations = map[string]string{podrefs.ConfigHashAnnotation: strings.Repeat("0", 64)}
	// Wave 0.6 hashed ConfigMap values as strings (Wave's own code at v0.6.0 gives this for
	// the same config): adopted too, with the default --hash-format.
	fromWave06 := deployment(ns, "from-wave-06", mod)
	fromWave06.Spec.Template.Annotations = map[string]string{podrefs.ConfigHashAnnotation: "0c38a0016d34e0c9d2a63eb128968d437eeb8891a0305dcae1b0f782407b5b5d"}
	createDeployment(t, client, current)
	createDeployment(t, client, stale)
	createDeployment(t, client, fromWave06)
	require.Len(t, replicaSets(t, client, ns, "current"), 1)
	require.Len(t, replicaSets(t, client, ns, "stale"), 1)
	require.Len(t, replicaSets(t, client, ns, "from-wave-06"), 1)

	p := startWave(t, ns)
	adopted := waitRecorded(t, client, ns, "current")
	require.Eventually(t, func() bool {
		return getDeployment(t, client, ns, "stale").Spec.Template.Annotations[podrefs.ConfigHashAnnotation] == "509f50320b71c3be0073e8a3287f839fedcb86af881fa801d7c2622bea259201"
	}, eventually, tick, "a stale Wave hash is brought up to date")
	settle(t, p)
	assert.Equal(t, current.Spec.Template.Annotations, adopted.Spec.Template.Annotations, "adoption does not touch the template")
	assert.Len(t, replicaSets(t, client, ns, "current"), 1, "adopting a current Wave hash rolls nothing")
	assert.Len(t, replicaSets(t, client, ns, "stale"), 2)
	waitRecorded(t, client, ns, "from-wave-06")
	assert.Len(t, replicaSets(t, client, ns, "from-wave-06"), 1, "adopting Wave 0.6's hash of the current config rolls nothing")

	// A restart of wave rolls nothing by itself.
	p.Stop(10 * time.Second)
	gen := getDeployment(t, client, ns, "current").Generation
	p2 := startWave(t, ns)
	settle(t, p2)
	assert.Equal(t, gen, getDeployment(t, client, ns, "current").Generation, "no rollout after a restart")
	assert.EqualValues(t, 3, p2.Metric(`configwave_wave_reconciles_total{result="unchanged"}`), "every workload found unchanged after a restart")
	assert.EqualValues(t, -1, p2.Metric(`configwave_wave_patches_total{kind="Deployment",type="rollout"}`))
	for _, resource := range []string{"configmaps", "deployments"} {
		assert.EqualValues(t, 0, p2.Metric(`configwave_wave_watch_restarts_total{resource="`+resource+`"}`), "first watches are not restarts: the series is there, at 0")
	}
}

// Opting a running workload in rolls nothing, where Wave writes its hash at once and rolls it
// (a deliberate difference, in docs/migrating.md's Wave table): wave records the config and
// waits for a change.
func TestOptInLaterRollsNothingUntilConfigChanges(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	plain := testcluster.Deployment(ns, "app", 1)
	withEnvKey("cm", "a")(&plain.Spec.Template.Spec)
	createDeployment(t, client, plain)
	p := startWave(t, ns)
	settle(t, p)

	_, err := client.AppsV1().Deployments(ns).Patch(ctx(t), "app", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+podrefs.UpdateOnConfigChangeAnnotation+`":"true"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	d := waitRecorded(t, client, ns, "app")
	settle(t, p)
	assert.Empty(t, d.Spec.Template.Annotations[podrefs.ConfigHashAnnotation], "opting in writes nothing to the template")
	assert.Len(t, replicaSets(t, client, ns, "app"), 1, "opting in rolls nothing")

	patchCM(t, client, ns, "cm", `{"data":{"a":"2"}}`)
	waitTemplateHashChange(t, client, ns, "app", inputsHash(d))
	settle(t, p)
	assert.Len(t, replicaSets(t, client, ns, "app"), 2, "the first change after opting in rolls once")
}

// Switching back from Wave: wave recorded a workload; wave stopped; the config changed and Wave
// rolled the workload, writing its hash of the new config on the template (here written by
// wave itself on an identical twin, which writes Wave's exact hash); wave started again. The
// template's Wave hash says the pods run the current config: wave adopts it into its record
// and rolls nothing, whatever its record held.
func TestSwitchingBackFromWaveRollsNothing(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "app-config", map[string]string{"key": "v1"})
	mod := func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("app-config")}}}
	}
	app, twin := deployment(ns, "app", mod), deployment(ns, "twin", mod)
	twin.Labels = map[string]string{"twin": "yes"}
	createDeployment(t, client, app)
	createDeployment(t, client, twin)
	p := startWave(t, ns)
	waitRecorded(t, client, ns, "app")
	waitRecorded(t, client, ns, "twin")
	settle(t, p)
	p.Stop(10 * time.Second)

	patchCM(t, client, ns, "app-config", `{"data":{"key":"v2"}}`)
	w := startWave(t, ns, "--label-selector=twin=yes") // Wave's hash of v2, as wave-k8s writes it
	require.Eventually(t, func() bool {
		return getDeployment(t, client, ns, "twin").Spec.Template.Annotations[podrefs.ConfigHashAnnotation] != ""
	}, eventually, tick)
	settle(t, w)
	w.Stop(10 * time.Second)
	waveHash := getDeployment(t, client, ns, "twin").Spec.Template.Annotations[podrefs.ConfigHashAnnotation]
	d := getDeployment(t, client, ns, "app")
	recorded := d.Annotations[rollout.InputsAnnotation]
	d.Spec.Template.Annotations = map[string]string{podrefs.ConfigHashAnnotation: waveHash} // Wave rolls app
	_, err := client.AppsV1().Deployments(ns).Update(ctx(t), d, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Len(t, replicaSets(t, client, ns, "app"), 2, "Wave rolled it")

	p2 := startWave(t, ns)
	require.Eventually(t, func() bool {
		return getDeployment(t, client, ns, "app").Annotations[rollout.InputsAnnotation] != recorded
	}, eventually, tick,
		"the current inputs adopted into the record: %s", p2.Log())
	settle(t, p2)
	assert.Len(t, replicaSets(t, client, ns, "app"), 2, "nothing rolled again")
	assert.Equal(t, waveHash, getDeployment(t, client, ns, "app").Spec.Template.Annotations[podrefs.ConfigHashAnnotation])
	assert.NotContains(t, p2.Log(), "config changed; rolling out")
	assert.Contains(t, p2.Log(), "the pods already run the current config")
}

func TestHashFormatV05AdoptsWave05Hash(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "app-config", map[string]string{"key": "value"})
	createSecret(t, client, ns, "app-secret", map[string]string{"password": "s3cr3t"})
	d := deployment(ns, "app", func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("app-config")}}, {SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("app-secret")}}}
	})
	// sha256 of {"configMaps":{"app-config":{"key":"value"}},"secrets":{"app-secret":{"password":"czNjcjN0"}}}
	d.Spec.Template.Annotations = map[string]string{podrefs.ConfigHashAnnotation: "0c38a0016d34e0c9d2a63eb128968d437eeb8891a0305dcae1b0f782407b5b5d"}
	createDeployment(t, client, d)
	p := startWave(t, ns, "--hash-format=wave-v05")
	waitRecorded(t, client, ns, "app")
	settle(t, p)
	assert.Len(t, replicaSets(t, client, ns, "app"), 1)
}

func TestMissingConfigThenCreated(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	p := startWave(t, ns)
	createDeployment(t, client, deployment(ns, "app", withEnvKey("later", "a")))
	require.Eventually(t, func() bool { return len(events(t, client, ns, "app", "ConfigMissing")) > 0 }, eventually, tick)
	msg := events(t, client, ns, "app", "ConfigMissing")[0].Message
	assert.Contains(t, msg, fmt.Sprintf(`configmap %s/later (used by container "app" env V) not found`, ns))
	before := waitRecorded(t, client, ns, "app")
	settle(t, p)
	missing := p.Metric(`configwave_wave_reconciles_total{result="missing"}`)
	time.Sleep(time.Second)
	assert.Equal(t, missing, p.Metric(`configwave_wave_reconciles_total{result="missing"}`), "no reconcile loop while config is missing")

	createCM(t, client, ns, "later", map[string]string{"a": "1"})
	waitTemplateHashChange(t, client, ns, "app", inputsHash(before))
}

func TestDeletionLeavesNothingBehind(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	p := startWave(t, ns)
	createDeployment(t, client, deployment(ns, "app", withEnvKey("cm", "a")))
	waitRecorded(t, client, ns, "app")
	require.Eventually(t, func() bool { return p.Metric("configwave_wave_workloads_tracked") == 1 }, eventually, tick)
	require.NoError(t, client.AppsV1().Deployments(ns).Delete(ctx(t), "app", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return p.Metric("configwave_wave_workloads_tracked") == 0 }, eventually, tick)
	_, err := client.CoreV1().ConfigMaps(ns).Get(ctx(t), "cm", metav1.GetOptions{})
	assert.NoError(t, err, "deleting a workload never deletes its config")
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx(t), "cm", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, cm.OwnerReferences)
	assert.Empty(t, cm.Finalizers)
}

func TestDryRunWritesNothing(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	d := deployment(ns, "app", withEnvKey("cm", "a"))
	d.Annotations[rollout.InputsAnnotation] = "configmap/cm=0000000000000000" // as if recorded before a change
	createDeployment(t, client, d)
	before := getDeployment(t, client, ns, "app")
	p := startWave(t, ns, "--dry-run")
	require.Eventually(t, func() bool { return len(events(t, client, ns, "app", "ConfigChanged")) > 0 }, eventually, tick)
	assert.Contains(t, events(t, client, ns, "app", "ConfigChanged")[0].Message, "dry run: would roll")
	settle(t, p)
	after := getDeployment(t, client, ns, "app")
	assert.Equal(t, before.Generation, after.Generation, "the spec was not written")
	assert.Equal(t, before.Annotations[rollout.InputsAnnotation], after.Annotations[rollout.InputsAnnotation], "the metadata was not written")
}

func TestMigrateFromWaveV05(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	d := deployment(ns, "app", withEnvKey("cm", "a"))
	d.Finalizers = []string{podrefs.WaveFinalizer, "example.com/keep"}
	createDeployment(t, client, d)
	d = getDeployment(t, client, ns, "app")
	waveRef := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "app", UID: d.UID, BlockOwnerDeletion: ptr(true), Controller: ptr(false)} // as Wave wrote it
	owner, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	otherRef := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.UID}
	_, err = client.CoreV1().ConfigMaps(ns).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm",
		OwnerReferences: []metav1.OwnerReference{waveRef, otherRef}}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.CoreV1().Secrets(ns).Create(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sec",
		OwnerReferences: []metav1.OwnerReference{waveRef}}, StringData: map[string]string{"p": "1"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	p := testcluster.StartProcess(t, waveBin, nil, "--kubeconfig="+cluster.Kubeconfig(), "--namespaces="+ns, "--migrate-from-wave-v05")
	require.Equal(t, 0, p.Wait(t, time.Minute), p.Log())

	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx(t), "cm", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []metav1.OwnerReference{otherRef}, cm.OwnerReferences, "only Wave's owner reference is removed")
	assert.Equal(t, map[string]string{"a": "1"}, cm.Data)
	sec, err := client.CoreV1().Secrets(ns).Get(ctx(t), "sec", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, sec.OwnerReferences)
	assert.Equal(t, []string{"example.com/keep"}, getDeployment(t, client, ns, "app").Finalizers)
	assert.Contains(t, p.Log(), "ownerReferencesRemoved=2")
	assert.Contains(t, p.Log(), "finalizersRemoved=1")

	// Let the namespace go away: drop the finalizer this test added.
	_, err = client.AppsV1().Deployments(ns).Patch(ctx(t), "app", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	require.NoError(t, err)
}

// wave works under a ServiceAccount bound to exactly the ClusterRole we ship. With cert-manager's
// and External Secrets' CRDs served, and config/wave-cert-manager applied beside it (but not
// config/wave-external-secrets), wave follows Certificates and says in one line what to grant for
// ExternalSecrets, and runs.
func TestRunsWithTheShippedClusterRole(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	testcluster.InstallSecretWriterCRDs(t, cluster)
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "wave", "clusterrole.yaml"))
	require.NoError(t, err)
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	require.NoError(t, err)
	role := obj.(*rbacv1.ClusterRole)
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			if res == "configmaps" || res == "secrets" {
				assert.NotContains(t, r.Verbs, "update")
				assert.NotContains(t, r.Verbs, "patch")
			}
		}
	}
	role.Name = ns + "-wave"
	_, err = client.RbacV1().ClusterRoles().Create(ctx(t), role, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = ignoreNotFound(client.RbacV1().ClusterRoles().Delete(ctx(t), role.Name, metav1.DeleteOptions{}))
	})
	_, err = client.CoreV1().ServiceAccounts(ns).Create(ctx(t), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "wave"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	bind := func(role string) {
		_, err = client.RbacV1().ClusterRoleBindings().Create(ctx(t), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "wave", Namespace: ns}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = ignoreNotFound(client.RbacV1().ClusterRoleBindings().Delete(ctx(t), role, metav1.DeleteOptions{}))
		})
	}
	bind(role.Name)
	cb, err := os.ReadFile(filepath.Join("..", "..", "config", "wave-cert-manager", "clusterrole.yaml"))
	require.NoError(t, err)
	obj, _, err = scheme.Codecs.UniversalDeserializer().Decode(cb, nil, nil)
	require.NoError(t, err)
	certRole := obj.(*rbacv1.ClusterRole)
	certRole.Name = ns + "-wave-cert-manager"
	_, err = client.RbacV1().ClusterRoles().Create(ctx(t), certRole, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = ignoreNotFound(client.RbacV1().ClusterRoles().Delete(ctx(t), certRole.Name, metav1.DeleteOptions{}))
	})
	bind(certRole.Name)
	tok, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx(t), "wave", &authv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	kubeconfig, err := cluster.KubeconfigFor(t.TempDir(), tok.Status.Token)
	require.NoError(t, err)

	// The Role that lets wave make its install key in its own namespace (here, the test's).
	kb, err := os.ReadFile(filepath.Join("..", "..", "config", "wave", "install-key-role.yaml"))
	require.NoError(t, err)
	for _, doc := range strings.Split(string(kb), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		require.NoError(t, err)
		switch o := obj.(type) {
		case *rbacv1.Role:
			_, err = client.RbacV1().Roles(ns).Create(ctx(t), o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			o.Subjects = []rbacv1.Subject{{Kind: "ServiceAccount", Name: "wave", Namespace: ns}}
			_, err = client.RbacV1().RoleBindings(ns).Create(ctx(t), o, metav1.CreateOptions{})
		}
		require.NoError(t, err)
	}

	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	var p *testcluster.Process
	require.Eventually(t, func() bool { // RBAC reaches the authorizer's cache in a moment
		var ready bool
		p, ready = tryStartWave(t, ns, "--kubeconfig="+kubeconfig, "--install-key-secret="+ns+"/configwave-install-key")
		if ready && strings.Contains(p.Log(), "keyedInputs=true") {
			return true
		}
		p.Stop(15 * time.Second)
		return false
	}, eventually, 500*time.Millisecond)
	_, err = client.CoreV1().Secrets(ns).Get(ctx(t), "configwave-install-key", metav1.GetOptions{})
	require.NoError(t, err, "wave made its install key under the shipped RBAC")
	createDeployment(t, client, deployment(ns, "app", withEnvKey("cm", "a")))
	before := waitRecorded(t, client, ns, "app")
	patchCM(t, client, ns, "cm", `{"data":{"a":"2"}}`)
	waitTemplateHashChange(t, client, ns, "app", inputsHash(before))
	require.Eventually(t, func() bool { return len(events(t, client, ns, "app", "ConfigChanged")) > 0 }, eventually, tick, "Events are allowed too")
	assert.NotContains(t, p.Log(), "forbidden")
	assert.Contains(t, p.Log(), `writers="certificates.cert-manager.io"`, "config/wave-cert-manager lets wave follow Certificates")
	assert.Contains(t, p.Log(), `wave may not list and watch a Secret writer's kind`, "one line says what to grant for ExternalSecrets")
	assert.Contains(t, p.Log(), `resource="externalsecrets.external-secrets.io"`)
	assert.Contains(t, p.Log(), "config/wave-external-secrets")
	assert.NotContains(t, p.Log(), `writers="externalsecrets.external-secrets.io"`)
}

func TestLeaderElectionFailover(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	le := []string{"--leader-election", "--leader-election-namespace=" + ns, "--leader-election-lease-duration=3s",
		"--leader-election-renew-deadline=2s", "--leader-election-retry-period=500ms"}
	first := startWave(t, ns, le...)
	require.Eventually(t, func() bool { return strings.Contains(first.Log(), "became the leader") }, eventually, tick)
	second := startWave(t, ns, le...)
	createDeployment(t, client, deployment(ns, "app", withEnvKey("cm", "a")))
	before := waitRecorded(t, client, ns, "app")
	assert.NotContains(t, second.Log(), "became the leader")

	first.Kill() // no lease release: the second must wait for the lease to expire
	patchCM(t, client, ns, "cm", `{"data":{"a":"2"}}`)
	require.Eventually(t, func() bool { return strings.Contains(second.Log(), "became the leader") }, eventually, tick)
	waitTemplateHashChange(t, client, ns, "app", inputsHash(before))
	settle(t, second)
	assert.Len(t, replicaSets(t, client, ns, "app"), 2)
}

// Restarts the API server the package's tests share while changes keep coming; it waits until
// the server is back, so the tests after it run normally.
func TestZZAPIServerRestartMidRun(t *testing.T) {
	p := changesAcrossAnOutage(t, func() { require.NoError(t, cluster.RestartAPIServer(ctx(t))) })
	for _, resource := range []string{"configmaps", "deployments"} {
		assert.GreaterOrEqual(t, p.Metric(`configwave_wave_watch_restarts_total{resource="`+resource+`"}`), float64(1), "%s watch re-opened and counted", resource)
	}
}

func TestLabelSelectorNarrowsWhatIsManaged(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	p := startWave(t, ns, "--label-selector=team=a")
	in := deployment(ns, "in", withEnvKey("cm", "a"))
	in.Labels = map[string]string{"team": "a"}
	out := deployment(ns, "out", withEnvKey("cm", "a"))
	createDeployment(t, client, in)
	createDeployment(t, client, out)
	waitRecorded(t, client, ns, "in")
	settle(t, p)
	assert.NotContains(t, getDeployment(t, client, ns, "out").Annotations, rollout.InputsAnnotation, "outside the selector: never written")
}

// With --hash-key-file the template hash is an HMAC: a reader of the Deployment cannot test
// guesses of the Secret's value against it.
func TestKeyedHash(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "app-config", map[string]string{"key": "value"})
	createSecret(t, client, ns, "app-secret", map[string]string{"password": "s3cr3t"})
	d := deployment(ns, "app", func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("app-config")}}, {SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("app-secret")}}}
	})
	d.Spec.Template.Annotations = map[string]string{podrefs.ConfigHashAnnotation: strings.Repeat("0", 64)} // stale: rolls at once
	createDeployment(t, client, d)
	keyFile := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(keyFile, []byte("configwave-test-key\n"), 0o600))
	p := startWave(t, ns, "--hash-key-file="+keyFile, "--crash-loop-detection=false")
	require.Eventually(t, func() bool {
		// HMAC-SHA256 under "configwave-test-key", computed with Python (see TestKeyedWaveHashGolden).
		return getDeployment(t, client, ns, "app").Spec.Template.Annotations[podrefs.ConfigHashAnnotation] == "8bb1e5dd39ee4baf505511d7b11322b25b0aca6fa1b7e2d4c2f1bb0b1de0695a"
	}, eventually, tick)
	// --crash-loop-detection=false: the rollout is followed from the Deployment's status alone;
	// wave never lists a pod.
	require.Eventually(t, func() bool { return len(events(t, client, ns, "app", "ConfigRolledOut")) > 0 }, eventually, tick)
	assert.EqualValues(t, -1, p.Metric(`configwave_wave_api_requests_total{client="pods",method="GET"}`), "no pod listed")
}

// No Secret value in wave's log at --v=10 and --vmodule=*=10, its Events, its metrics or the annotations it
// writes.
func TestNoSecretValueInAnyOutput(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	const canary = "CONFIGWAVE-CANARY-8d2e4b"
	createSecret(t, client, ns, "creds", map[string]string{"token": canary + "-v1"})
	p := startWave(t, ns, "--v=10", "--vmodule=*=10")
	createDeployment(t, client, deployment(ns, "app", func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("creds")}}}
	}))
	before := waitRecorded(t, client, ns, "app")
	patchSecret(t, client, ns, "creds", fmt.Sprintf(`{"stringData":{"token":%q}}`, canary+"-v2"))
	after := waitTemplateHashChange(t, client, ns, "app", inputsHash(before))
	settle(t, p)

	_, metrics := p.Get("/metrics")
	var text strings.Builder
	evs, err := client.CoreV1().Events(ns).List(ctx(t), metav1.ListOptions{})
	require.NoError(t, err)
	for _, e := range evs.Items {
		text.WriteString(e.Message + "\n")
	}
	for k, v := range after.Annotations {
		text.WriteString(k + "=" + v + "\n")
	}
	for k, v := range after.Spec.Template.Annotations {
		text.WriteString(k + "=" + v + "\n")
	}
	for name, out := range map[string]string{"log": p.Log(), "metrics": metrics, "events and annotations": text.String()} {
		assert.NotContains(t, out, canary, "secret value in the %s", name)
		assert.NotContains(t, out, base64.StdEncoding.EncodeToString([]byte(canary + "-v2"))[:20], "base64 secret value in the %s", name)
	}
	assert.Contains(t, p.Log(), "log verbosity capped")
}

// --namespaces with two namespaces (one informer factory each): both are managed, a third is
// never written to.
func TestSeveralNamespaces(t *testing.T) {
	client := adminClient(t)
	a, b, other := testcluster.Namespace(t, client), testcluster.Namespace(t, client), testcluster.Namespace(t, client)
	for _, ns := range []string{a, b, other} {
		createCM(t, client, ns, "cm", map[string]string{"a": "1"})
		createDeployment(t, client, deployment(ns, "app", withEnvKey("cm", "a")))
	}
	p := startWave(t, a+","+b, "--allow-cross-namespace-refs") // startWave passes the first as --namespaces
	before := map[string]string{}
	for _, ns := range []string{a, b} {
		before[ns] = inputsHash(waitRecorded(t, client, ns, "app"))
		patchCM(t, client, ns, "cm", `{"data":{"a":"2"}}`)
	}
	for _, ns := range []string{a, b} {
		waitTemplateHashChange(t, client, ns, "app", before[ns])
	}
	patchCM(t, client, other, "cm", `{"data":{"a":"2"}}`)
	settle(t, p)
	d := getDeployment(t, client, other, "app")
	assert.NotContains(t, d.Annotations, rollout.InputsAnnotation, "a namespace outside --namespaces is never written to")
	assert.Empty(t, d.Spec.Template.Annotations[podrefs.ConfigHashAnnotation])

	// An extra-configmaps entry in a namespace wave does not watch would always read as absent.
	_, err := client.AppsV1().Deployments(a).Patch(ctx(t), "app", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"wave.pusher.com/extra-configmaps":"`+other+`/cm"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		for _, e := range events(t, client, a, "app", "InvalidAnnotation") {
			if strings.Contains(e.Message, "configmap "+other+"/cm is in a namespace wave does not watch") && strings.Contains(e.Message, "add "+other+" to wave's --namespaces") {
				return true
			}
		}
		return false
	}, eventually, tick, "an Event says the entry's namespace is not watched")
}

// A tenant's extra-secrets entry naming another namespace is refused by default: a Warning
// Event names the entry and the flag, the other namespace's Secret is never part of the
// workload's hash, and changing it rolls nothing.
func TestCrossNamespaceRefsRefused(t *testing.T) {
	client := adminClient(t)
	a, b := testcluster.Namespace(t, client), testcluster.Namespace(t, client)
	createCM(t, client, a, "cm", map[string]string{"a": "1"})
	createSecret(t, client, b, "creds", map[string]string{"token": "other tenant's"})
	d := deployment(a, "app", withEnvKey("cm", "a"))
	d.Annotations[podrefs.ExtraSecretsAnnotation] = b + "/creds"
	createDeployment(t, client, d)
	p := startWave(t, a+","+b)
	recorded := waitRecorded(t, client, a, "app")
	assert.NotContains(t, recorded.Annotations[rollout.InputsAnnotation], b+"/creds", "the other namespace's Secret is not an input")
	require.Eventually(t, func() bool {
		for _, e := range events(t, client, a, "app", "InvalidAnnotation") {
			if strings.Contains(e.Message, "annotation "+podrefs.ExtraSecretsAnnotation+" names secret "+b+"/creds in another namespace") &&
				strings.Contains(e.Message, "--allow-cross-namespace-refs") {
				return true
			}
		}
		return false
	}, eventually, tick, "an Event names the entry and the flag")

	patchSecret(t, client, b, "creds", `{"stringData":{"token":"changed"}}`)
	settle(t, p)
	assert.Len(t, replicaSets(t, client, a, "app"), 1, "a change in another namespace rolls nothing")
	assert.Equal(t, recorded.Spec.Template.Annotations, getDeployment(t, client, a, "app").Spec.Template.Annotations)
}
