package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testpod"
)

// nginxConf is a config that passes `nginx -t` whatever readiness answers: a 503 there is a
// config that the app's own checker accepts and that still takes the pod out of its Service.
func nginxConf(version string, readiness int) string {
	return fmt.Sprintf(`pid /tmp/nginx.pid;
events {}
http {
  client_body_temp_path /tmp/body;
  proxy_temp_path /tmp/proxy;
  fastcgi_temp_path /tmp/fastcgi;
  uwsgi_temp_path /tmp/uwsgi;
  scgi_temp_path /tmp/scgi;
  access_log off;
  server {
    listen 8080;
    location /ready {
      if (-f /tmp/unready) { return 503 "kept unready\n"; }
      return %d "%s\n";
    }
  }
}
`, readiness, version)
}

// The story of --rollout=one-first on a real node: a Deployment of 4 replicas of Debian's nginx,
// each with our reloader from our image as a native sidecar that signals nginx (shared process
// namespace), under the shipped RBAC. A config that passes `nginx -t` but makes the readiness
// location answer 503: sampled every 100 ms, at most one pod is unready at any moment and the
// other three never have the bad config in their folder; the first pod is Ready again on the
// old config within the soak and a reload. Then a good config reaches all four; a newer change
// during a soak supersedes the one under trial, which no second pod lays out; the first pod
// deleted mid-soak leaves nothing stuck; and a sidecar cut off from the API server keeps what
// it has while the others take a change, and follows once it is back.
func TestOneFirstOnARealNode(t *testing.T) {
	c := testcluster.Need(t, cluster)
	testpod.Need(t)
	nginx := testcluster.NeedProgram(t, "nginx", "nginx-light")
	node := testcluster.NeedNode(t, c)
	client := adminClient(t)
	const ourImage, nginxImage = "localhost/configwave:node", "localhost/nginx:node"
	layout := testpod.Layout(t) // built once per test binary, before the import's own time starts
	require.NoError(t, node.ImportLayoutImage(ctx(t), layout, "reloader", ourImage))
	files, err := testcluster.HostProgramFiles(ctx(t), nginx)
	require.NoError(t, err)
	img, err := testcluster.FilesImage(files, []string{nginx}, "65532:65532")
	require.NoError(t, err)
	require.NoError(t, node.ImportImage(ctx(t), img, nginxImage))
	for _, conf := range []string{nginxConf("good", 200), nginxConf("bad", 503)} { // the app's own checker accepts both
		f := filepath.Join(t.TempDir(), "nginx.conf")
		require.NoError(t, os.WriteFile(f, []byte(strings.ReplaceAll(conf, "/tmp/", filepath.Dir(f)+"/")), 0o644))
		out, err := exec.Command(nginx, "-t", "-c", f).CombinedOutput()
		require.NoError(t, err, "nginx -t: %s", out)
	}

	ns := c.Namespace(t, client)
	applyReloaderRBAC(t, client, ns)
	applyOneFirstRBAC(t, client, ns)
	applyOneFirstPolicy(t, client) // every write below is a real sidecar's, through the policy
	_, err = client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app-config", map[string]string{"nginx.conf": nginxConf("v1", 200)}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	const soak = 6 * time.Second
	always, yes, replicas := corev1.ContainerRestartPolicyAlways, true, int32(4)
	spec := corev1.PodSpec{
		ServiceAccountName:    "configwave-reloader",
		ShareProcessNamespace: &yes,
		InitContainers: []corev1.Container{{
			Name: "reloader", Image: ourImage, ImagePullPolicy: corev1.PullNever, RestartPolicy: &always,
			Args: []string{"--configmap=app-config", "--configroot=/config", "--reload-process=nginx", "--rollout=one-first", "--rollout-soak=" + soak.String()},
			Env: []corev1.EnvVar{
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			},
			StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(9533)}},
				PeriodSeconds: 1, FailureThreshold: 60},
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/config"}},
		}},
		Containers: []corev1.Container{{
			Name: "nginx", Image: nginxImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{"-c", "/config/nginx.conf", "-g", "daemon off;"},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)}},
				PeriodSeconds: 1, FailureThreshold: 1},
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/config", ReadOnly: true}, {Name: "tmp", MountPath: "/tmp"}},
		}},
		Volumes: []corev1.Volume{
			{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
	}
	testcluster.OnRealNode(&spec)
	labels := map[string]string{"app": "web"}
	_, err = client.AppsV1().Deployments(ns).Create(ctx(t), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	f := &oneFirstNode{t: t, client: client, node: node, ns: ns, replicas: int(replicas), soak: soak}
	pods, conf, allOn := f.pods, f.conf, f.allOn
	if !assert.Eventually(t, func() bool { return allOn("v1") }, 2*time.Minute, 200*time.Millisecond, "4 pods Ready on v1") {
		t.Fatal(testcluster.DescribePods(ctx(t), client, ns))
	}

	// The bad config: sampled every 100 ms until every pod is Ready on v1 again.
	patched := time.Now()
	patchData(t, client, ns, "app-config", fmt.Sprintf(`{"data":{"nginx.conf":%q}}`, nginxConf("v2", 503)))
	hadBad := map[string]bool{}
	maxUnready, back := 0, time.Duration(0)
	sawBad := false
	for time.Since(patched) < soak+30*time.Second {
		unready := 0
		ps := pods()
		for _, p := range ps {
			if !testcluster.PodReady(p) {
				unready++
			}
			if strings.Contains(conf(p), `"v2\n"`) {
				hadBad[p.Name] = true
				sawBad = true
			}
		}
		maxUnready = max(maxUnready, unready)
		require.LessOrEqual(t, unready, 1, "at most one pod is unready at any moment")
		require.LessOrEqual(t, len(hadBad), 1, "the bad config reaches one pod only: %v", hadBad)
		if sawBad && unready == 0 && allOn("v1") {
			back = time.Since(patched)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.True(t, sawBad, "one pod tried the bad config")
	require.NotZero(t, back, "every pod Ready on v1 again within the soak and a reload; pods: %s", testcluster.DescribePods(ctx(t), client, ns))
	t.Logf("bad config: one pod of 4 unready at most (%d), back on the old config %s after the patch (soak %s)", maxUnready, back.Round(100*time.Millisecond), soak)
	// Said on the ConfigMap as `kubectl describe configmap` shows it (by its UID), naming the
	// config by its resourceVersion.
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx(t), "app-config", metav1.GetOptions{})
	require.NoError(t, err)
	var said []string
	require.Eventually(t, func() bool {
		evs, err := client.CoreV1().Events(ns).List(ctx(t), metav1.ListOptions{FieldSelector: "involvedObject.kind=ConfigMap,involvedObject.name=app-config,involvedObject.uid=" + string(cm.UID)})
		require.NoError(t, err)
		said = nil
		for _, e := range evs.Items {
			said = append(said, e.Reason+": "+e.Message)
			if e.Reason == "ConfigRejected" && strings.Contains(e.Message, "became not Ready") && strings.Contains(e.Message, "configmap "+ns+"/app-config@") {
				return true
			}
		}
		return false
	}, eventually, tick, "an Event on the ConfigMap (its UID) says which config was rejected, as the pod went not Ready: %q", &said)
	var first corev1.Pod
	for _, p := range pods() {
		if hadBad[p.Name] {
			first = p
		}
	}
	metrics := getFromPod(t, first.Status.PodIP+":9533", "/metrics")
	assert.Contains(t, metrics, "configwave_reloader_rollout_rejected_total 1")

	// The first pod's sidecar killed after its rejection (SIGKILL, as an OOM kill does): kubelet
	// restarts it, and it keeps the good config, never the rejected one its ConfigMap still
	// holds (it resumes from what it keeps beside the config). Sampled every 100 ms for a soak
	// and 5 s after the restart.
	f.killSidecar(first.Name)
	for restarted := time.Now(); time.Since(restarted) < soak+5*time.Second; time.Sleep(100 * time.Millisecond) {
		p, err := client.CoreV1().Pods(ns).Get(ctx(t), first.Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Contains(t, conf(*p), `"v1\n"`, "the restarted sidecar keeps the good config, not the rejected one")
	}
	assert.NotContains(t, eventsAbout(t, client, ns, "Pod", first.Name), "RunsRejectedConfig", "the restarted sidecar does not start on the rejected config")

	// A good config reaches all four.
	patched = time.Now()
	patchData(t, client, ns, "app-config", fmt.Sprintf(`{"data":{"nginx.conf":%q}}`, nginxConf("v3", 200)))
	laidAt := map[string]time.Duration{}
	require.Eventually(t, func() bool {
		for _, p := range pods() {
			if _, ok := laidAt[p.Name]; !ok && strings.Contains(conf(p), `"v3\n"`) {
				laidAt[p.Name] = time.Since(patched).Round(100 * time.Millisecond)
			}
		}
		return allOn("v3")
	}, 2*time.Minute, 100*time.Millisecond, "every pod serves the good config")
	t.Logf("good config: the last of 4 pods Ready on it %s after the patch (soak %s, batches of 1); each pod laid it out at %v",
		time.Since(patched).Round(100*time.Millisecond), soak, laidAt)

	for _, p := range pods() {
		for _, c := range p.Status.InitContainerStatuses {
			if p.Name != first.Name { // killed on purpose above
				assert.Zero(t, c.RestartCount, "pod %s: the reloader never restarted", p.Name)
			}
		}
	}
	// A sidecar killed mid-soak, a pod kept unready on purpose, and three changes 1 s apart,
	// each against the other pods' files and the Lease, sampled every 100 ms.
	f.faults()

	// A newer change mid-soak supersedes the one under trial: v5 is laid out by one pod, v6
	// comes during its soak, and v5 never reaches a second pod's folder (sampled every 100 ms
	// until every pod is Ready on v6).
	patched = time.Now()
	patchData(t, client, ns, "app-config", fmt.Sprintf(`{"data":{"nginx.conf":%q}}`, nginxConf("v5", 200)))
	hadV5 := map[string]bool{}
	require.Eventually(t, func() bool {
		for _, p := range pods() {
			if strings.Contains(conf(p), `"v5\n"`) {
				hadV5[p.Name] = true
			}
		}
		return len(hadV5) > 0
	}, eventually, 100*time.Millisecond, "one pod takes v5 first")
	patchData(t, client, ns, "app-config", fmt.Sprintf(`{"data":{"nginx.conf":%q}}`, nginxConf("v6", 200)))
	superseded := time.Now()
	for !allOn("v6") {
		if time.Since(superseded) > 2*time.Minute { // described only then: two LISTs a sample would slow the sampling
			t.Fatalf("every pod serves v6 after it superseded v5; pods: %s", testcluster.DescribePods(ctx(t), client, ns))
		}
		for _, p := range pods() {
			if strings.Contains(conf(p), `"v5\n"`) {
				hadV5[p.Name] = true
			}
		}
		require.LessOrEqual(t, len(hadV5), 1, "a superseded change never reaches a second pod: %v", hadV5)
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("v6 during v5's soak: v5 laid out by %d pod, every pod on v6 %s after v6's patch (%s after v5's)", len(hadV5),
		time.Since(superseded).Round(100*time.Millisecond), time.Since(patched).Round(100*time.Millisecond))

	// The first pod deleted mid-soak: once its claim expires another pod takes its place, and
	// the change still reaches every pod (the replacement starts on what its source holds).
	patched = time.Now()
	patchData(t, client, ns, "app-config", fmt.Sprintf(`{"data":{"nginx.conf":%q}}`, nginxConf("v4", 200)))
	var tried string
	require.Eventually(t, func() bool {
		for _, p := range pods() {
			if strings.Contains(conf(p), `"v4\n"`) {
				tried = p.Name
				return true
			}
		}
		return false
	}, eventually, tick, "one pod takes v4 first")
	require.NoError(t, client.CoreV1().Pods(ns).Delete(ctx(t), tried, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return allOn("v4") }, 3*time.Minute, 200*time.Millisecond, "the change reaches every pod after its first pod was deleted mid-soak")
	t.Logf("first pod deleted mid-soak: every pod on the change %s after the patch (its claim expires after %s)", time.Since(patched).Round(100*time.Millisecond), soak*3/2+15*time.Second)

	// One sidecar cut off from the API server mid-soak: once a first pod has laid v7 out, the
	// node's relay to the API server closes the connections of a second pod whose sidecar has
	// v7 waiting for its turn (its rollout_waiting gauge), and refuses its new ones. It can never
	// see v7's promotion: sampled every 100 ms while the other three take v7 and for a soak and
	// 5 s after, it keeps v4, and its sidecar neither exits nor restarts (the pod stays Ready).
	// Restored, it follows.
	const waiting = "configwave_reloader_rollout_waiting 1\n"
	patched = time.Now()
	patchData(t, client, ns, "app-config", fmt.Sprintf(`{"data":{"nginx.conf":%q}}`, nginxConf("v7", 200)))
	var cut corev1.Pod
	require.Eventually(t, func() bool {
		ps := pods()
		for _, p := range ps {
			if strings.Contains(conf(p), `"v7\n"`) {
				for _, q := range ps {
					if q.Name != p.Name && q.DeletionTimestamp == nil && strings.Contains(metricsOf(q), waiting) {
						cut = q
						return true
					}
				}
			}
		}
		return false
	}, eventually, 100*time.Millisecond, "one pod takes v7 first, and another's sidecar has v7 waiting")
	restore := node.CutAPI(t, cut.Status.PodIP)
	cutAt := time.Now()
	var othersOn time.Time
	for othersOn.IsZero() || time.Since(othersOn) < soak+5*time.Second {
		if time.Since(cutAt) > 2*time.Minute {
			t.Fatalf("the other three take v7 while one sidecar is cut off; pods: %s", testcluster.DescribePods(ctx(t), client, ns))
		}
		others := 0
		for _, p := range pods() {
			if p.Name == cut.Name {
				require.Contains(t, conf(p), `"v4\n"`, "the sidecar cut off keeps what it has")
				require.True(t, testcluster.PodReady(p), "the pod cut off stays Ready")
			} else if testcluster.PodReady(p) && strings.Contains(conf(p), `"v7\n"`) {
				others++
			}
		}
		if others == int(replicas)-1 && othersOn.IsZero() {
			othersOn = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Contains(t, metricsOf(cut), waiting, "the sidecar cut off still has v7 waiting")
	restore()
	restored := time.Now()
	require.Eventually(t, func() bool { return allOn("v7") }, 2*time.Minute, 200*time.Millisecond, "restored, the sidecar cut off follows")
	t.Logf("one sidecar cut off mid-soak: the other three on v7 %s after the patch, the one cut off on v4 until its restore and on v7 %s after it",
		othersOn.Sub(patched).Round(100*time.Millisecond), time.Since(restored).Round(100*time.Millisecond))
}

// applyOneFirstPolicy creates config/reloader-rbac-one-first's admission policy and its binding
// (cluster-wide) until the test ends.
func applyOneFirstPolicy(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "reloader-rbac-one-first", "policy.yaml"))
	require.NoError(t, err)
	for _, doc := range strings.Split(string(b), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		require.NoError(t, err)
		api := client.AdmissionregistrationV1()
		switch o := obj.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			_, err = api.ValidatingAdmissionPolicies().Create(ctx(t), o, metav1.CreateOptions{})
			t.Cleanup(func() {
				_ = api.ValidatingAdmissionPolicies().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			})
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			_, err = api.ValidatingAdmissionPolicyBindings().Create(ctx(t), o, metav1.CreateOptions{})
			t.Cleanup(func() {
				_ = api.ValidatingAdmissionPolicyBindings().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			})
		default:
			t.Fatalf("policy.yaml holds a %T", obj)
		}
		require.NoError(t, err)
	}
}

// eventsAbout lists the reasons and messages of the Events about one object.
func eventsAbout(t *testing.T, client kubernetes.Interface, ns, kind, name string) string {
	t.Helper()
	evs, err := client.CoreV1().Events(ns).List(ctx(t), metav1.ListOptions{FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name})
	require.NoError(t, err)
	var b strings.Builder
	for _, e := range evs.Items {
		fmt.Fprintf(&b, "%s: %s\n", e.Reason, e.Message)
	}
	return b.String()
}

// metricsOf is a pod's sidecar metrics, read from this host (the node's bridge), or "" when it
// does not answer.
func metricsOf(p corev1.Pod) string {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + p.Status.PodIP + ":9533/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// getFromPod reads a path of a pod's address from this host (the node's bridge).
func getFromPod(t *testing.T, addr, path string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
