package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/autorollback"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// On the real node, where kubelet mounts the files and sets the environment: v1, then v2, then
// `kubectl rollout undo`: the undo's new pod reads v1 in its file and its environment while
// the ConfigMap holds v2, and wave leaves it there (watched for 30 s, past kubelet's first
// refresh of the volume); v3 then rolls forward.
func TestRevisionsUndoBringsTheOldConfigBackOnARealNode(t *testing.T) {
	c := testcluster.Need(t, cluster)
	node := testcluster.NeedNode(t, c)
	client := adminClient(t)
	ns := c.Namespace(t, client)
	startWaveWithWebhook(t, client, ns)
	createCM(t, client, ns, "app-config", map[string]string{"GREETING": "v1"})

	one := int32(1)
	tmpl := pauseOnRealNode("web", "app-config")
	withVolume(corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("app-config")}}})(&tmpl.Spec)
	_, err := client.AppsV1().Deployments(ns).Create(ctx(t), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true", revisions.OptInAnnotation: "true"}},
		Spec:       appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// runs waits for the one ready pod of the Deployment's current revision and returns what
	// its container reads: the file kubelet mounted, and its environment.
	runs := func(why string) (file, env string) {
		t.Helper()
		require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, "web", 2*time.Minute), why)
		rev := inputsHash(getDeployment(t, client, ns, "web"))
		var pod corev1.Pod
		require.Eventually(t, func() bool {
			pods, err := client.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{})
			require.NoError(t, err)
			n := 0
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && p.Annotations[rollout.InputsHashAnnotation] == rev && testcluster.PodReady(p) && len(p.Status.ContainerStatuses) == 1 {
					pod, n = p, n+1
				}
			}
			return n == 1
		}, 2*time.Minute, tick, "%s: no ready pod of revision %s", why, rev)
		b, err := os.ReadFile(filepath.Join(node.PodVolumeDir(pod.UID, "conf"), "GREETING"))
		require.NoError(t, err, why)
		environ, err := node.ContainerEnviron(ctx(t), pod.Status.ContainerStatuses[0].ContainerID)
		require.NoError(t, err, why)
		for _, kv := range environ {
			if v, ok := strings.CutPrefix(kv, "GREETING="); ok {
				env = v
			}
		}
		return string(b), env
	}

	require.Eventually(t, func() bool { return revisions.IsRevision(inputsHash(getDeployment(t, client, ns, "web"))) }, eventually, tick, "turning revisions on rolls once")
	file, env := runs("v1")
	assert.Equal(t, "v1", file)
	assert.Equal(t, "v1", env)
	v1 := inputsHash(getDeployment(t, client, ns, "web"))

	patchCM(t, client, ns, "app-config", `{"data":{"GREETING":"v2"}}`)
	waitTemplateHashChange(t, client, ns, "web", v1)
	file, env = runs("v2")
	assert.Equal(t, "v2", file)
	assert.Equal(t, "v2", env)

	undoDeployment(t, client, ns, "web")
	file, env = runs("undo")
	assert.Equal(t, "v1", file, "the undo's pod reads the old file, while the ConfigMap holds v2")
	assert.Equal(t, "v1", env, "and the old environment")
	require.Eventually(t, func() bool { return len(events(t, client, ns, "web", "ConfigRolledBack")) == 1 }, eventually, tick)
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		require.Equal(t, v1, inputsHash(getDeployment(t, client, ns, "web")), "wave rolled the undo forward")
	}
	file, _ = runs("30 s after the undo")
	assert.Equal(t, "v1", file, "kubelet's refresh keeps the snapshot's content")

	patchCM(t, client, ns, "app-config", `{"data":{"GREETING":"v3"}}`)
	waitTemplateHashChange(t, client, ns, "web", v1)
	file, env = runs("v3")
	assert.Equal(t, "v3", file)
	assert.Equal(t, "v3", env)
}

// On the real node, a change that makes the app crash-loop undoes itself: with
// configwave.io/rollback-on-failure, wave reports ConfigRolloutFailed from kubelet's
// CrashLoopBackOff, undoes the Deployment once, to the revision before, whose pods read the old
// config from its snapshot, and holds it there.
func TestRevisionsFailedChangeUndoesItselfOnARealNode(t *testing.T) {
	c := testcluster.Need(t, cluster)
	testcluster.NeedNode(t, c)
	client := adminClient(t)
	ns := c.Namespace(t, client)
	p := startWaveWithWebhook(t, client, ns)
	createCM(t, client, ns, "app-config", map[string]string{"GREETING": "v1"})
	one := int32(1)
	tmpl := pauseOnRealNode("web", "app-config")
	_, err := client.AppsV1().Deployments(ns).Create(ctx(t), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true",
			revisions.OptInAnnotation: "true", autorollback.Annotation: "true"}},
		// Ready 3 s before it counts as available: a container that exits a moment after it
		// starts never completes the rollout.
		Spec: appsv1.DeploymentSpec{Replicas: &one, MinReadySeconds: 3, Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return revisions.IsRevision(inputsHash(getDeployment(t, client, ns, "web"))) }, eventually, tick, "turning revisions on rolls once")
	require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, "web", 2*time.Minute))
	v1 := inputsHash(getDeployment(t, client, ns, "web"))

	start := time.Now()
	require.Eventually(t, func() bool { return eventCount(t, client, ns, "web", "ConfigRolledOut") >= 1 }, eventually, tick, "turning revisions on is reported rolled out")
	rolledOut := eventCount(t, client, ns, "web", "ConfigRolledOut")
	patchCM(t, client, ns, "app-config", `{"data":{"EXIT_CODE":"3"}}`)
	require.Eventually(t, func() bool { return len(events(t, client, ns, "web", "ConfigRollbackStarted")) == 1 }, 2*time.Minute, tick,
		"the crash-looping rollout is never undone")
	t.Logf("patch to undo: %s", time.Since(start).Round(100*time.Millisecond))
	assert.Contains(t, events(t, client, ns, "web", "ConfigRolloutFailed")[0].Message, "CrashLoopBackOff")
	assert.Contains(t, events(t, client, ns, "web", "ConfigRollbackStarted")[0].Message, "undone to revision")
	assert.Equal(t, v1, inputsHash(getDeployment(t, client, ns, "web")), "back at the revision before")
	require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, "web", 2*time.Minute), "the old revision serves")
	t.Logf("patch to rolled back and complete: %s", time.Since(start).Round(100*time.Millisecond))
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		require.Equal(t, v1, inputsHash(getDeployment(t, client, ns, "web")), "held at the old config: no loop")
	}
	assert.Equal(t, 1.0, p.Metric(`configwave_wave_rollbacks_total{kind="Deployment"}`), "exactly one undo")
	assert.Len(t, events(t, client, ns, "web", "ConfigRollbackStarted"), 1)
	assert.Equal(t, rolledOut, eventCount(t, client, ns, "web", "ConfigRolledOut"), "the undo's own rollout is not the change rolled out")
	pods, err := client.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{})
	require.NoError(t, err)
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp == nil {
			assert.Equal(t, v1, pod.Annotations[rollout.InputsHashAnnotation], "only pods of the old revision are left")
			assert.True(t, testcluster.PodReady(pod))
		}
	}

	// What a user then types: history says what failed and what runs now, diff which key the
	// failed change added.
	history := kubectlConfigwave(t, "history", "deploy/web", "-n", ns)
	t.Logf("kubectl configwave history deploy/web:\n%s", history)
	assert.Contains(t, history, "failed, rolled back: ", "the failed revision, and why")
	assert.Contains(t, history, "CrashLoopBackOff")
	assert.Contains(t, history, "held by an undo", "what runs now")
	var h struct {
		Revisions []struct {
			Revision   int64  `json:"revision"`
			InputsHash string `json:"inputsHash"`
			Outcome    string `json:"outcome"`
		} `json:"revisions"`
	}
	require.NoError(t, json.Unmarshal([]byte(kubectlConfigwave(t, "history", "deploy/web", "-n", ns, "-o", "json")), &h))
	var failed, now int64
	for _, r := range h.Revisions {
		switch {
		case strings.HasPrefix(r.Outcome, "failed"):
			failed = r.Revision
		case r.InputsHash == v1 && strings.HasPrefix(r.Outcome, "held"):
			now = r.Revision
		}
	}
	require.NotZero(t, failed, "history names the failed revision: %+v", h)
	require.NotZero(t, now, "history names the revision that runs now: %+v", h)
	diff := kubectlConfigwave(t, "diff", "deploy/web", "-n", ns, fmt.Sprintf("--revision=%d", now), fmt.Sprintf("--to=%d", failed))
	t.Logf("kubectl configwave diff deploy/web --revision=%d --to=%d:\n%s", now, failed, diff)
	assert.Contains(t, diff, "EXIT_CODE", "the key the failed change added")
}

// plugin is the kubectl plugin, built by the first test that needs it and removed by TestMain.
var plugin struct {
	once   sync.Once
	bin    string
	remove func()
	err    error
}

// kubectlConfigwave runs the kubectl plugin as a user types it.
func kubectlConfigwave(t *testing.T, args ...string) string {
	t.Helper()
	plugin.once.Do(func() {
		plugin.bin, plugin.remove, plugin.err = testcluster.BuildCommand(filepath.Join("..", "kubectl-configwave"), "kubectl-configwave")
	})
	require.NoError(t, plugin.err, "build kubectl-configwave")
	cmd := exec.CommandContext(ctx(t), plugin.bin, append([]string{"--kubeconfig=" + cluster.Kubeconfig()}, args...)...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl configwave %v: %s", args, out)
	return string(out)
}

// On the real node, a StatefulSet of OrderedReady pods (its default) undoes a change that
// makes its app exit at start: wave applies the ControllerRevision before, as kubectl rollout
// undo does, and deletes the pod that crash-loops on the failed config, which the
// StatefulSet's controller would otherwise wait for forever (Kubernetes' "Forced rollback").
// The pod made again reads the old config from its snapshot and is ready.
func TestRevisionsFailedChangeUndoesAStatefulSetOnARealNode(t *testing.T) {
	c := testcluster.Need(t, cluster)
	testcluster.NeedNode(t, c)
	client := adminClient(t)
	ns := c.Namespace(t, client)
	p := startWaveWithWebhook(t, client, ns)
	createCM(t, client, ns, "app-config", map[string]string{"GREETING": "v1"})
	one := int32(1)
	tmpl := pauseOnRealNode("db", "app-config")
	_, err := client.AppsV1().StatefulSets(ns).Create(ctx(t), &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Annotations: map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true",
			revisions.OptInAnnotation: "true", autorollback.Annotation: "true"}},
		Spec: appsv1.StatefulSetSpec{Replicas: &one, MinReadySeconds: 3, Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	get := func() *appsv1.StatefulSet {
		s, err := client.AppsV1().StatefulSets(ns).Get(ctx(t), "db", metav1.GetOptions{})
		require.NoError(t, err)
		return s
	}
	// serving: db-0 is of the set's current template, available, and the set has taken it.
	serving := func() bool {
		s := get()
		pod, err := client.CoreV1().Pods(ns).Get(ctx(t), "db-0", metav1.GetOptions{})
		return err == nil && pod.DeletionTimestamp == nil && testcluster.PodReady(*pod) &&
			pod.Annotations[rollout.InputsHashAnnotation] == s.Spec.Template.Annotations[rollout.InputsHashAnnotation] &&
			s.Status.ObservedGeneration == s.Generation && s.Status.AvailableReplicas == 1 && s.Status.UpdateRevision == s.Status.CurrentRevision
	}
	require.Eventually(t, func() bool {
		return revisions.IsRevision(get().Spec.Template.Annotations[rollout.InputsHashAnnotation])
	}, eventually, tick, "turning revisions on rolls once")
	require.Eventually(t, serving, 2*time.Minute, tick, "db-0 never served the first revision")
	v1 := get().Spec.Template.Annotations[rollout.InputsHashAnnotation]

	start := time.Now()
	require.Eventually(t, func() bool { return eventCount(t, client, ns, "db", "ConfigRolledOut") >= 1 }, eventually, tick, "turning revisions on is reported rolled out")
	rolledOut := eventCount(t, client, ns, "db", "ConfigRolledOut")
	patchCM(t, client, ns, "app-config", `{"data":{"EXIT_CODE":"3"}}`)
	require.Eventually(t, func() bool { return len(events(t, client, ns, "db", "ConfigRollbackStarted")) == 1 }, 2*time.Minute, tick,
		"the crash-looping rollout is never undone")
	t.Logf("patch to undo: %s", time.Since(start).Round(100*time.Millisecond))
	assert.Contains(t, events(t, client, ns, "db", "ConfigRolloutFailed")[0].Message, "CrashLoopBackOff")
	assert.Contains(t, events(t, client, ns, "db", "ConfigRollbackStarted")[0].Message, "deleted pod db-0, not available on the failed config")
	assert.Equal(t, v1, get().Spec.Template.Annotations[rollout.InputsHashAnnotation], "back at the revision before")
	require.Eventually(t, serving, 2*time.Minute, tick, "db-0 never served the old revision again: the set waits for its pod of the failed config")
	t.Logf("patch to db-0 serving the old revision: %s", time.Since(start).Round(100*time.Millisecond))
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		require.Equal(t, v1, get().Spec.Template.Annotations[rollout.InputsHashAnnotation], "held at the old config: no loop")
	}
	assert.Equal(t, 1.0, p.Metric(`configwave_wave_rollbacks_total{kind="StatefulSet"}`), "exactly one undo")
	assert.Len(t, events(t, client, ns, "db", "ConfigRollbackStarted"), 1)
	assert.Equal(t, rolledOut, eventCount(t, client, ns, "db", "ConfigRolledOut"), "the undo's own rollout is not the change rolled out")
}

// On the real node, under the real Argo Rollouts controller: a canary of a config change is a
// canary. At setWeight 50 and a pause, the canary pod's file (kubelet mounted it, refreshing
// volumes every second here) holds v2 and the stable pod's holds v1, sampled for 10 s, while
// the ConfigMap holds v2; after the abort, both pods read v1, and wave rolls nothing.
func TestRevisionsCanaryOnARealNode(t *testing.T) {
	c := testcluster.Need(t, cluster)
	node := testcluster.NeedNode(t, c)
	client := adminClient(t)
	testcluster.StartArgoRollouts(t, cluster)
	ns := c.Namespace(t, client)
	p := startWaveWithWebhook(t, client, ns)
	createCM(t, client, ns, "app-config", map[string]string{"GREETING": "v1"})
	tmpl := pauseOnRealNode("web", "app-config")
	withVolume(corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("app-config")}}})(&tmpl.Spec)
	canary := startCanary(t, ns, &tmpl)
	revision, promote := canary.revision, canary.promote
	// reads maps each revision to what the files of its ready pods hold.
	reads := func() map[string][]string {
		list, err := client.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{})
		require.NoError(t, err)
		out := map[string][]string{}
		for _, pod := range list.Items {
			if pod.DeletionTimestamp != nil || !testcluster.PodReady(pod) {
				continue
			}
			b, err := os.ReadFile(filepath.Join(node.PodVolumeDir(pod.UID, "conf"), "GREETING"))
			require.NoError(t, err)
			rev := pod.Annotations[rollout.InputsHashAnnotation]
			out[rev] = append(out[rev], string(b))
		}
		return out
	}
	require.Eventually(t, func() bool { return revisions.IsRevision(revision()) }, eventually, tick, "turning revisions on rolls once")
	v1 := revision()
	// Turning on is a canary too: promoted, so that both pods run v1 from its snapshot.
	require.Eventually(t, func() bool {
		promote()
		got := reads()
		return len(got) == 1 && len(got[v1]) == 2
	}, 2*time.Minute, 500*time.Millisecond, "v1 on both pods")
	settle(t, p)

	patchCM(t, client, ns, "app-config", `{"data":{"GREETING":"v2"}}`)
	require.Eventually(t, func() bool { return revision() != v1 }, eventually, tick)
	v2 := revision()
	require.Eventually(t, func() bool { got := reads(); return len(got[v2]) == 1 && len(got[v1]) == 1 }, 2*time.Minute, 200*time.Millisecond,
		"the canary step: one ready pod of v2 beside one of v1")
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		got := reads()
		require.Equal(t, []string{"v2"}, got[v2], "the canary pod reads the new config")
		require.Equal(t, []string{"v1"}, got[v1], "the stable pod keeps the old, past kubelet's refreshes")
	}

	canary.abort()
	require.Eventually(t, func() bool { got := reads(); return len(got) == 1 && len(got[v1]) == 2 }, 2*time.Minute, 200*time.Millisecond, "after the abort, only v1's pods")
	assert.Equal(t, []string{"v1", "v1"}, reads()[v1], "both read the old config, while the ConfigMap holds v2")
	rolled := p.Metric(`configwave_wave_reconciles_total{result="rolled"}`)
	settle(t, p)
	assert.Equal(t, rolled, p.Metric(`configwave_wave_reconciles_total{result="rolled"}`), "wave rolls nothing after the abort")
}
