package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// --rollout=one-first through the API server, three sidecars under the shipped RBAC
// (config/reloader-rbac and config/reloader-rbac-one-first): one pod takes a change first and
// the others follow one at a time after its soak; a change on which the first pod goes not
// Ready (set here as kubelet sets it; the real node's proof runs nginx) is put back on that pod
// and never laid out on the others, with an Event on the ConfigMap and the metric; the next
// change reaches every pod.
func TestOneFirstThroughTheAPI(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app-config", map[string]string{"app.yaml": "v1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	owner, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "web", nil, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	applyReloaderRBAC(t, client, ns)
	applyOneFirstRBAC(t, client, ns)
	tok, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx(t), "configwave-reloader", &authv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	kubeconfig, err := cluster.KubeconfigFor(t.TempDir(), tok.Status.Token)
	require.NoError(t, err)
	// The last sidecar reaches the API server through a proxy the test can cut.
	proxy := testcluster.StartProxy(t, cluster.APIAddr())
	viaProxy, err := cluster.KubeconfigVia(t.TempDir(), proxy.Addr)
	require.NoError(t, err)
	viaProxy = withToken(t, viaProxy, kubeconfig)

	const n = 3
	yes := true
	roots := make([]string, n)
	apps := make([]*fakeApp, n)
	procs := make([]*testcluster.Process, n)
	for i := range n {
		name := fmt.Sprintf("web-%d", i)
		// A pod of the workload "web" that no scheduler takes: its Ready condition is the test's.
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "web", UID: owner.UID, Controller: &yes}}},
			Spec: corev1.PodSpec{SchedulerName: "nobody", Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
		_, err := client.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{})
		require.NoError(t, err)
		setReady(t, client, ns, name, true)
		roots[i] = t.TempDir()
		apps[i] = newFakeApp(t, filepath.Join(roots[i], "app.yaml"))
		kc, env := kubeconfig, []string{"POD_NAME=" + name, "POD_NAMESPACE=" + ns}
		if i == n-1 {
			// client-go's HTTP/2 health check finds the cut connection in 2 s, not 45.
			kc, env = viaProxy, append(env, "HTTP2_READ_IDLE_TIMEOUT_SECONDS=1", "HTTP2_PING_TIMEOUT_SECONDS=1")
		}
		procs[i] = startReloader(t, env, "--kubeconfig="+kc, "--configmap=app-config",
			"--configroot="+roots[i], "--reload-http="+apps[i].url(), "--rollout=one-first", "--rollout-soak=3s")
	}
	for _, p := range procs {
		p.WaitReady(t)
	}
	laid := func() []string {
		out := make([]string, n)
		for i, r := range roots {
			out[i] = readFile(r, "app.yaml")
		}
		return out
	}
	count := func(v string) int {
		c := 0
		for _, s := range laid() {
			if s == v {
				c++
			}
		}
		return c
	}
	assert.Equal(t, []string{"v1", "v1", "v1"}, laid())

	// A good change: one pod first, then the others, never two at once before the soak ends.
	patchData(t, client, ns, "app-config", `{"data":{"app.yaml":"v2"}}`)
	require.Eventually(t, func() bool { return count("v2") == 1 }, eventually, tick, "one pod takes the change first: %v", laid())
	first := time.Now()
	for time.Since(first) < 2*time.Second {
		require.LessOrEqual(t, count("v2"), 1, "no other pod follows during the first pod's soak")
		time.Sleep(100 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return count("v2") == n }, eventually, tick, "the others follow: %v", laid())
	t.Logf("change → every pod: %s (soak 3s, one at a time)", time.Since(first).Round(100*time.Millisecond))
	for i, a := range apps {
		// The files are in place a moment before the app is told.
		require.Eventually(t, func() bool { return len(a.reloads()) > 0 }, eventually, tick, "pod %d told", i)
		assert.Equal(t, []string{"v2"}, a.reloads(), "pod %d told once, of the new config", i)
	}

	// A bad change: the first pod goes not Ready on it; it puts v2 back, nobody else lays v3 out.
	patchData(t, client, ns, "app-config", `{"data":{"app.yaml":"v3"}}`)
	require.Eventually(t, func() bool { return count("v3") == 1 }, eventually, tick, "one pod takes the change first: %v", laid())
	bad := -1
	for i, s := range laid() {
		if s == "v3" {
			bad = i
		}
	}
	setReady(t, client, ns, fmt.Sprintf("web-%d", bad), false)
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		require.LessOrEqual(t, count("v3"), 1, "the bad config never reaches a second pod")
		time.Sleep(100 * time.Millisecond)
	}
	assert.Equal(t, []string{"v2", "v2", "v2"}, laid(), "the first pod put its last good config back")
	assert.Equal(t, []string{"v2", "v3", "v2"}, apps[bad].reloads(), "its app was told of the bad config, then of the good one again")
	assert.EqualValues(t, 1, procs[bad].Metric("configwave_reloader_rollout_rejected_total"))
	_, body := procs[bad].Get("/status")
	var st struct {
		Rollout struct {
			State  string `json:"state"`
			Reason string `json:"reason"`
		} `json:"rollout"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &st), body)
	assert.Equal(t, "Rejected", st.Rollout.State)
	assert.Contains(t, st.Rollout.Reason, "not Ready")
	require.Eventually(t, func() bool {
		evs, err := client.CoreV1().Events(ns).List(ctx(t), metav1.ListOptions{FieldSelector: "involvedObject.kind=ConfigMap,involvedObject.name=app-config"})
		require.NoError(t, err)
		for _, e := range evs.Items {
			if e.Reason == "ConfigRejected" && strings.Contains(e.Message, "not Ready") {
				return true
			}
		}
		return false
	}, eventually, tick, "an Event on the ConfigMap says the config was rejected, and why")

	// The next change starts over and reaches every pod.
	setReady(t, client, ns, fmt.Sprintf("web-%d", bad), true)
	patchData(t, client, ns, "app-config", `{"data":{"app.yaml":"v4"}}`)
	require.Eventually(t, func() bool { return count("v4") == n }, eventually, tick, "the next change reaches every pod: %v", laid())

	// A newer change during a soak supersedes the one under trial: it never reaches a second
	// pod, and the newest reaches every pod.
	patchData(t, client, ns, "app-config", `{"data":{"app.yaml":"v5"}}`)
	require.Eventually(t, func() bool { return count("v5") == 1 }, eventually, tick, "one pod takes v5 first: %v", laid())
	patchData(t, client, ns, "app-config", `{"data":{"app.yaml":"v6"}}`)
	require.Eventually(t, func() bool {
		require.LessOrEqual(t, count("v5"), 1, "a superseded change never reaches a second pod")
		return count("v6") == n
	}, eventually, tick, "the newest change reaches every pod: %v", laid())

	// A sidecar cut off from the API keeps what it has and lays out nothing that was not
	// promoted; back, it follows.
	proxy.Cut()
	patchData(t, client, ns, "app-config", `{"data":{"app.yaml":"v7"}}`)
	require.Eventually(t, func() bool { return count("v7") == n-1 }, eventually, tick, "the others take the change: %v", laid())
	assert.Equal(t, "v6", laid()[n-1], "the sidecar cut off keeps what it has")
	proxy.Restore()
	require.Eventually(t, func() bool { return count("v7") == n }, eventually, tick, "back, it follows: %v", laid())

	for _, p := range procs {
		assert.NotContains(t, p.Log(), "v3", "no config value is logged")
	}
	documented, err := testcluster.DocumentedMetrics(filepath.Join("..", "..", "docs", "metrics.md"), "reloader, `--rollout=one-first`")
	require.NoError(t, err)
	exported := procs[0].MetricNames()
	for _, name := range documented {
		assert.True(t, exported[name], "docs/metrics.md lists %s, which the reloader does not export under --rollout=one-first", name)
	}
}

// withToken is the kubeconfig at via (the proxy's server) with the credentials of from.
func withToken(t *testing.T, via, from string) string {
	t.Helper()
	src, err := clientcmd.LoadFromFile(from)
	require.NoError(t, err)
	dst, err := clientcmd.LoadFromFile(via)
	require.NoError(t, err)
	for name := range dst.AuthInfos {
		for _, a := range src.AuthInfos {
			dst.AuthInfos[name] = a
		}
	}
	out := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*dst, out))
	return out
}

// setReady sets the pod's Ready condition, as kubelet does from its readiness probe.
func setReady(t *testing.T, client kubernetes.Interface, ns, name string, ready bool) {
	t.Helper()
	pod, err := client.CoreV1().Pods(ns).Get(ctx(t), name, metav1.GetOptions{})
	require.NoError(t, err)
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	_, err = client.CoreV1().Pods(ns).UpdateStatus(ctx(t), pod, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// applyOneFirstRBAC creates config/reloader-rbac-one-first's Role and RoleBinding.
func applyOneFirstRBAC(t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	applyRBAC(t, client, ns, "reloader-rbac-one-first", "role.yaml", "rolebinding.yaml")
}
