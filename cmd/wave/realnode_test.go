package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
)

// On a real node: a ConfigMap change makes wave roll a Deployment, a StatefulSet and a
// DaemonSet whose containers really run (the pause image, the config in their environment);
// kubelet starts new pods and stops the old ones, and ConfigRolledOut follows what they did.
// Then a config the app cannot start with: kubelet's own CrashLoopBackOff, and wave reports
// ConfigRolloutFailed naming it while the old pod keeps running.
func TestRealPodsReplacedOnARealNode(t *testing.T) {
	c := testcluster.Need(t, cluster)
	testcluster.NeedNode(t, c)
	client := adminClient(t)
	ns := c.Namespace(t, client)
	createCM(t, client, ns, "app-config", map[string]string{"GREETING": "v1"})

	template := func(app string) corev1.PodTemplateSpec { return pauseOnRealNode(app, "app-config") }
	optedIn := map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}
	one := int32(1)
	selector := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	_, err := client.AppsV1().Deployments(ns).Create(ctx(t), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: optedIn},
		// A pod counts as available once it has been ready 3 s: a container that exits a moment
		// after it starts is never "rolled out". Without this (or a readiness probe), Kubernetes
		// itself judges such a rollout complete and removes the old pod.
		Spec: appsv1.DeploymentSpec{Replicas: &one, MinReadySeconds: 3, Selector: selector("web"), Template: template("web")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.AppsV1().StatefulSets(ns).Create(ctx(t), &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Annotations: optedIn},
		Spec: appsv1.StatefulSetSpec{Replicas: &one, ServiceName: "db", Selector: selector("db"), Template: template("db")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.AppsV1().DaemonSets(ns).Create(ctx(t), &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Annotations: optedIn},
		Spec: appsv1.DaemonSetSpec{Selector: selector("agent"), Template: template("agent")}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// running is the UIDs of the pods kubelet reports ready, by app.
	running := func() map[string][]types.UID {
		pods, err := client.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{})
		require.NoError(t, err)
		out := map[string][]types.UID{}
		for _, p := range pods.Items {
			if testcluster.PodReady(p) && p.DeletionTimestamp == nil {
				out[p.Labels["app"]] = append(out[p.Labels["app"]], p.UID)
			}
		}
		return out
	}
	oneEach := func(m map[string][]types.UID) bool {
		return len(m["web"]) == 1 && len(m["db"]) == 1 && len(m["agent"]) == 1
	}
	var before map[string][]types.UID
	require.Eventually(t, func() bool { before = running(); return oneEach(before) }, 2*time.Minute, tick, "the pods never ran on the real node")
	p := startWave(t, ns)
	waitRecorded(t, client, ns, "web")
	settle(t, p)

	patchCM(t, client, ns, "app-config", `{"data":{"GREETING":"v2"}}`)
	for _, name := range []string{"web", "db", "agent"} {
		require.Eventually(t, func() bool { return len(events(t, client, ns, name, "ConfigRolledOut")) > 0 }, time.Minute, tick, "%s's rollout is not reported", name)
	}
	var after map[string][]types.UID
	require.Eventually(t, func() bool { after = running(); return oneEach(after) }, time.Minute, tick, "one ready pod each after the rollout")
	for app, uids := range after {
		assert.NotEqual(t, before[app], uids, "%s's pod was replaced", app)
	}

	patchCM(t, client, ns, "app-config", `{"data":{"EXIT_CODE":"3"}}`)
	require.Eventually(t, func() bool { return len(events(t, client, ns, "web", "ConfigRolloutFailed")) > 0 }, time.Minute, tick,
		"the crash-looping rollout of web is not reported")
	assert.Regexp(t, `the configmap/app-config change failed: pod web-[a-z0-9-]+ of the new config: container "app" is in CrashLoopBackOff`,
		events(t, client, ns, "web", "ConfigRolloutFailed")[0].Message)
	assert.Equal(t, after["web"], running()["web"], "the pod from before the change still runs")
}

// pauseOnRealNode is a pod template for the real node: the pause image (which exits with
// $EXIT_CODE when its config sets one), labelled app, its environment from configMap.
func pauseOnRealNode(app, configMap string) corev1.PodTemplateSpec {
	grace := int64(1)
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  new(bool),
			Containers: []corev1.Container{{
				Name: "app", Image: testcluster.PauseImage, ImagePullPolicy: corev1.PullNever,
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref(configMap)}}},
			}},
		},
	}
	testcluster.OnRealNode(&tmpl.Spec)
	return tmpl
}
