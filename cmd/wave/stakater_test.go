package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// stakaterDeployment is a Deployment as written for Stakater Reloader: its annotations, none
// of Wave's.
func stakaterDeployment(ns, name string, annotations map[string]string, mods ...func(*corev1.PodSpec)) *appsv1.Deployment {
	d := testcluster.Deployment(ns, name, 1)
	d.Annotations = annotations
	for _, m := range mods {
		m(&d.Spec.Template.Spec)
	}
	return d
}

func withEnvFrom(cm string) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = append(s.Containers[0].EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref(cm)}})
	}
}

// Manifests written for Stakater Reloader, unchanged: each annotation rolls what Reloader's
// documentation says it rolls, once per change, and nothing else. A workload that carries
// Wave's annotation too rolls once, not twice.
func TestStakaterReloaderManifests(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	for _, name := range []string{"app-config", "unused", "excluded"} {
		createCM(t, client, ns, name, map[string]string{"a": "1"})
	}
	for name, ann := range map[string]map[string]string{"shared": {podrefs.StakaterMatch: "true"}, "ignored": {podrefs.StakaterIgnore: "true"}} {
		_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	auto := map[string]string{podrefs.StakaterAuto: "true"}
	both := map[string]string{podrefs.StakaterAuto: "true", podrefs.UpdateOnConfigChangeAnnotation: "true"}
	onTemplate := stakaterDeployment(ns, "on-template", nil, withEnvFrom("app-config"))
	onTemplate.Spec.Template.Annotations = auto
	for _, d := range []*appsv1.Deployment{
		stakaterDeployment(ns, "auto", auto, withEnvFrom("app-config"), withEnvFrom("ignored")),
		stakaterDeployment(ns, "named", map[string]string{podrefs.StakaterConfigMapReload: "unused"}, withEnvFrom("app-config")),
		stakaterDeployment(ns, "search", map[string]string{podrefs.StakaterSearch: "true"}, withEnvFrom("app-config"), withEnvFrom("shared")),
		stakaterDeployment(ns, "excluding", map[string]string{podrefs.StakaterAuto: "true", podrefs.StakaterConfigMapsExclude: "app-config, excluded"}, withEnvFrom("app-config")),
		stakaterDeployment(ns, "both", both, withEnvFrom("app-config")),
		onTemplate,
		stakaterDeployment(ns, "not-opted-in", nil, withEnvFrom("app-config")),
	} {
		createDeployment(t, client, d)
	}
	// Reloader's --enable-pprof and --pprof-addr carry over too.
	pprofAddr := testcluster.FreeAddr(t)
	p := startWave(t, ns, "--enable-pprof", "--pprof-addr="+pprofAddr)
	opted := []string{"auto", "named", "search", "excluding", "both", "on-template"}
	for _, name := range opted {
		waitRecorded(t, client, ns, name)
	}
	settle(t, p)
	for path, want := range map[string]int{"/debug/pprof/heap": http.StatusOK, "/debug/pprof/cmdline": http.StatusNotFound} {
		resp, err := http.Get("http://" + pprofAddr + path)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, "%s: the profiles are served, the command line (which may hold a webhook token) is not", path)
	}
	rolls := func() map[string]int {
		out := map[string]int{}
		for _, name := range append(opted, "not-opted-in") {
			out[name] = len(replicaSets(t, client, ns, name)) - 1
		}
		return out
	}
	require.Equal(t, map[string]int{"auto": 0, "named": 0, "search": 0, "excluding": 0, "both": 0, "on-template": 0, "not-opted-in": 0}, rolls(), "adoption rolls nothing")

	patchCM(t, client, ns, "app-config", `{"data":{"a":"2"}}`)
	waitTemplateHashChange(t, client, ns, "auto", "")
	settle(t, p)
	assert.Equal(t, map[string]int{"auto": 1, "named": 0, "search": 0, "excluding": 0, "both": 1, "on-template": 1, "not-opted-in": 0}, rolls(),
		"auto and both roll once; a reload list, a search, an exclusion do not follow app-config")
	assert.NotEmpty(t, getDeployment(t, client, ns, "both").Spec.Template.Annotations[podrefs.ConfigHashAnnotation], "Wave's hash where Wave's annotation is")
	assert.Empty(t, getDeployment(t, client, ns, "auto").Spec.Template.Annotations[podrefs.ConfigHashAnnotation], "and only there")

	patchCM(t, client, ns, "unused", `{"data":{"a":"2"}}`)   // named in a reload list, used by no pod
	patchCM(t, client, ns, "shared", `{"data":{"a":"2"}}`)   // matched by search
	patchCM(t, client, ns, "ignored", `{"data":{"a":"2"}}`)  // reloader.stakater.com/ignore
	patchCM(t, client, ns, "excluded", `{"data":{"a":"2"}}`) // excluded, and not used
	waitTemplateHashChange(t, client, ns, "named", "")
	waitTemplateHashChange(t, client, ns, "search", "")
	settle(t, p)
	assert.Equal(t, map[string]int{"auto": 1, "named": 1, "search": 1, "excluding": 0, "both": 1, "on-template": 1, "not-opted-in": 0}, rolls())
	assert.Contains(t, events(t, client, ns, "named", "ConfigChanged")[0].Message, "configmap/unused changed")
}

// Switching from Stakater Reloader rolls nothing: a workload Reloader brought up to date (its
// STAKATER_* env var, or its last-reloaded-from annotation, holds Reloader's hash of the
// current data) is adopted as it is; one Reloader left behind rolls once; the next change
// rolls each once.
func TestSwitchingFromStakaterReloaderRollsNothing(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cfg", map[string]string{"a": "2"})
	cur, err := client.CoreV1().ConfigMaps(ns).Get(ctx(t), "cfg", metav1.GetOptions{})
	require.NoError(t, err)
	currentHash := confighash.StakaterHash(cur)
	olderHash := confighash.StakaterHash(&corev1.ConfigMap{Data: map[string]string{"a": "1"}})
	auto := map[string]string{podrefs.StakaterAuto: "true"}
	withMark := func(v string) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.Containers[0].Env = append(s.Containers[0].Env, corev1.EnvVar{Name: "STAKATER_CFG_CONFIGMAP", Value: v})
		}
	}
	annotated := stakaterDeployment(ns, "annotated", auto, withEnvFrom("cfg"))
	annotated.Spec.Template.Annotations = map[string]string{podrefs.StakaterLastReloadedFrom: `{"type":"CONFIGMAP","name":"cfg","namespace":"` + ns + `","hash":"` + currentHash + `","containerRefs":["app"],"observedAt":1763884800}`}
	for _, d := range []*appsv1.Deployment{
		stakaterDeployment(ns, "current", auto, withEnvFrom("cfg"), withMark(currentHash)),
		stakaterDeployment(ns, "behind", auto, withEnvFrom("cfg"), withMark(olderHash)),
		annotated,
		stakaterDeployment(ns, "never-reloaded", auto, withEnvFrom("cfg")),
	} {
		createDeployment(t, client, d)
	}
	names := []string{"current", "behind", "annotated", "never-reloaded"}
	for _, name := range names {
		require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, name, eventually))
	}
	p := startWave(t, ns)
	for _, name := range names {
		waitRecorded(t, client, ns, name)
	}
	settle(t, p)
	count := func() map[string]int {
		out := map[string]int{}
		for _, name := range names {
			out[name] = len(replicaSets(t, client, ns, name))
		}
		return out
	}
	assert.Equal(t, map[string]int{"current": 1, "behind": 2, "annotated": 1, "never-reloaded": 1}, count())
	assert.Contains(t, events(t, client, ns, "behind", "ConfigChanged")[0].Message, "configmap/cfg (Reloader's mark is older)")

	patchCM(t, client, ns, "cfg", `{"data":{"a":"3"}}`)
	waitTemplateHashChange(t, client, ns, "current", "")
	settle(t, p)
	assert.Equal(t, map[string]int{"current": 2, "behind": 3, "annotated": 2, "never-reloaded": 2}, count(), "the next change rolls each once")
}

// Stakater Reloader's chart renders --log-level=info by default; with enableHA (or two
// replicas) --enable-ha=true and POD_NAME, POD_NAMESPACE; with logFormat: json, --log-format=json;
// with syncAfterRestart, --sync-after-restart=true; with enableCSIIntegration,
// --enable-csi-integration=true (the driver is not installed here). wave runs with them unchanged. It elects on
// Reloader's own Lease, so while a Reloader replica still holds it (a rolling switch) wave
// writes nothing, and takes over once Reloader stops renewing it. It logs one JSON object per
// line, says in one line that --sync-after-restart changes nothing, and rolls a Deployment
// written for Reloader.
func TestStakaterChartArguments(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "app-config", map[string]string{"a": "1"})
	createDeployment(t, client, stakaterDeployment(ns, "app", map[string]string{podrefs.StakaterAuto: "true"}, withEnvFrom("app-config")))
	// A Reloader replica leads, renewing its Lease every 200 ms until it stops.
	reloader, now := "reloader-5c8b-old", metav1.NewMicroTime(time.Now())
	_, err := client.CoordinationV1().Leases(ns).Create(ctx(t), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "stakater-reloader-lock"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &reloader, LeaseDurationSeconds: ptr[int32](2), AcquireTime: &now, RenewTime: &now}}, metav1.CreateOptions{})
	require.NoError(t, err)
	stopRenewing, renewed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(renewed)
		for {
			select {
			case <-stopRenewing:
				return
			case <-time.After(200 * time.Millisecond):
			}
			body, _ := json.Marshal(map[string]any{"spec": map[string]any{"renewTime": metav1.NewMicroTime(time.Now())}})
			_, _ = client.CoordinationV1().Leases(ns).Patch(ctx(t), "stakater-reloader-lock", types.MergePatchType, body, metav1.PatchOptions{})
		}
	}()
	stop := sync.OnceFunc(func() { close(stopRenewing); <-renewed })
	t.Cleanup(stop)
	addr, chartAddr := testcluster.FreeAddr(t), testcluster.FreeAddr(t)
	// The chart's environment: watchGlobally: false (KUBERNETES_NAMESPACE), enableHA,
	// enableMetricsByNamespace. No --namespaces: KUBERNETES_NAMESPACE scopes wave as it scopes
	// Reloader. Reloader's fixed :9090 is moved to a free port for the test.
	// Its alerts on every reload (ALERT_*), to a chat webhook taking Slack's attachments.
	alerts := make(chan string, 10)
	chat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		alerts <- string(b)
	}))
	t.Cleanup(chat.Close)
	env := []string{"POD_NAME=reloader-7d9f-x2k", "POD_NAMESPACE=" + ns, "KUBERNETES_NAMESPACE=" + ns, "RELOADER_NAMESPACE=" + ns,
		"RELOADER_DEPLOYMENT_NAME=reloader-reloader", "METRICS_COUNT_BY_NAMESPACE=enabled",
		"ALERT_ON_RELOAD=true", "ALERT_SINK=slack", "ALERT_WEBHOOK_URL=" + chat.URL + "/services/T000/B000/s3cr3t", "ALERT_ADDITIONAL_INFO=cluster-eu-1"}
	p := testcluster.StartProcess(t, waveBin, env, "--listen-address="+addr, "--reloader-listen-address="+chartAddr, "--kubeconfig="+cluster.Kubeconfig(),
		"--log-level=info", "--log-format=json", "--enable-ha=true", "--sync-after-restart=true", "--enable-csi-integration=true",
		"--leader-election-lease-duration=2s", "--leader-election-renew-deadline=1s", "--leader-election-retry-period=200ms")
	p.Addr = addr
	p.WaitReady(t)
	chart := &testcluster.Process{Addr: chartAddr}
	code, _ := chart.Get("/live")
	assert.Equal(t, http.StatusOK, code, "the chart's liveness probe")
	code, _ = chart.Get("/metrics")
	assert.Equal(t, http.StatusOK, code, "the chart's readiness probe")
	holder := func() string {
		l, err := client.CoordinationV1().Leases(ns).Get(ctx(t), "stakater-reloader-lock", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	time.Sleep(3 * time.Second) // longer than the Lease lasts: only the renewals keep it Reloader's
	assert.Equal(t, reloader, holder(), "Reloader's replica still holds its Lease")
	assert.Empty(t, getDeployment(t, client, ns, "app").Annotations[rollout.InputsAnnotation], "and wave has written nothing")
	stop() // Reloader's pod goes
	require.Eventually(t, func() bool { h := holder(); return h != "" && h != reloader }, eventually, tick, "wave leads once Reloader stops renewing: %s", p.Log())

	before := inputsHash(waitRecorded(t, client, ns, "app"))
	patchCM(t, client, ns, "app-config", `{"data":{"a":"2"}}`)
	waitTemplateHashChange(t, client, ns, "app", before)
	// The count follows the write's answer, which may come after the Deployment shows it.
	require.Eventually(t, func() bool { return chart.Metric(`reloader_reload_executed_total{success="true"}`) == 1 }, eventually, tick,
		"Reloader's series, where its ServiceMonitor scrapes")
	assert.EqualValues(t, 0, chart.Metric(`reloader_reload_executed_total{success="false"}`))
	assert.EqualValues(t, 1, chart.Metric(`reloader_reload_executed_total_by_namespace{namespace="`+ns+`",success="true"}`))
	select {
	case body := <-alerts:
		var msg struct {
			Attachments []struct {
				Text string `json:"text"`
			} `json:"attachments"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &msg), body)
		require.Len(t, msg.Attachments, 1)
		assert.Equal(t, "cluster-eu-1 : wave detected changes in *configmap/app-config* in namespace *"+ns+"*. Hence rolled out *app* of type *Deployment* in namespace *"+ns+"*", msg.Attachments[0].Text)
	case <-time.After(eventually):
		t.Fatalf("no alert for the rollout: %s", p.Log())
	}
	assert.NotContains(t, p.Log(), "s3cr3t", "the webhook URL's path is a credential")
	lines := strings.Split(strings.TrimSpace(p.Log()), "\n")
	for _, line := range lines {
		var entry map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &entry), "not one JSON object: %q", line)
		assert.NotEmpty(t, entry["msg"], line)
	}
	assert.Contains(t, p.Log(), "--sync-after-restart is Stakater Reloader's: wave compares every workload with its config at start anyway")
	assert.Contains(t, p.Log(), "became the leader")
	assert.Contains(t, p.Log(), "--enable-csi-integration: the Secrets Store CSI driver's CRDs are not installed", "no CRDs: one line, and wave runs")
}

// Reloader run with renamed annotations (its chart's custom_annotations render
// "--auto-annotation" "NAME", flag then value) and --auto-reload-all: wave reads the renamed
// names, a workload with no auto annotation follows the config its pods use, one whose renamed
// auto annotation says "false" does not, and a renamed reload list still names what it names.
func TestStakaterCustomAnnotationsAndAutoReloadAll(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "app-config", map[string]string{"a": "1"})
	createCM(t, client, ns, "other", map[string]string{"a": "1"})
	createDeployment(t, client, stakaterDeployment(ns, "plain", nil, withEnvFrom("app-config")))
	createDeployment(t, client, stakaterDeployment(ns, "opted-out", map[string]string{"example.com/auto": "false"}, withEnvFrom("app-config")))
	createDeployment(t, client, stakaterDeployment(ns, "named", map[string]string{"example.com/auto": "false", "example.com/configmaps": "other"}, withEnvFrom("app-config")))
	p := startWave(t, ns, "--auto-reload-all=true", "--auto-annotation", "example.com/auto", "--configmap-annotation", "example.com/configmaps")

	plain, named := inputsHash(waitRecorded(t, client, ns, "plain")), inputsHash(waitRecorded(t, client, ns, "named"))
	patchCM(t, client, ns, "app-config", `{"data":{"a":"2"}}`)
	waitTemplateHashChange(t, client, ns, "plain", plain)
	settle(t, p)
	assert.Empty(t, getDeployment(t, client, ns, "opted-out").Annotations[rollout.InputsAnnotation], "auto false opts out of --auto-reload-all")
	assert.Equal(t, named, inputsHash(getDeployment(t, client, ns, "named")), "its reload list names other, and its auto is false")

	patchCM(t, client, ns, "other", `{"data":{"a":"2"}}`)
	waitTemplateHashChange(t, client, ns, "named", named)
}

// A switch while Stakater Reloader has a Deployment paused for its pause-period (spec.paused and
// its paused-at annotation, as Reloader writes them): Reloader's timer is gone with Reloader,
// so wave holds the change made meanwhile until the period that began at paused-at is over,
// then resumes the Deployment and the change rolls at once: a second ReplicaSet from
// kube-controller-manager. A Deployment the user paused is left paused.
func TestStakaterPausedDeploymentIsResumed(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "app-config", map[string]string{"a": "1"})
	auto := map[string]string{podrefs.StakaterAuto: "true", podrefs.StakaterPausePeriod: "1h"}
	createDeployment(t, client, stakaterDeployment(ns, "stranded", auto, withEnvFrom("app-config")))
	createDeployment(t, client, stakaterDeployment(ns, "users-own", map[string]string{podrefs.StakaterAuto: "true"}, withEnvFrom("app-config")))
	require.Len(t, replicaSets(t, client, ns, "stranded"), 1)
	pausedAt := time.Now().UTC().Format(time.RFC3339)
	for name, patch := range map[string]string{
		"stranded":  `{"spec":{"paused":true},"metadata":{"annotations":{"` + podrefs.StakaterPausedAt + `":"` + pausedAt + `"}}}`,
		"users-own": `{"spec":{"paused":true}}`,
	} {
		_, err := client.AppsV1().Deployments(ns).Patch(ctx(t), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
	}

	p := startWave(t, ns)
	before := inputsHash(waitRecorded(t, client, ns, "stranded"))
	patchCM(t, client, ns, "app-config", `{"data":{"a":"2"}}`)
	require.Eventually(t, func() bool {
		return strings.Contains(p.Log(), `"rollout held" workload="deployment `+ns+`/stranded"`) && strings.Contains(p.Log(), "as Stakater Reloader pauses the Deployment")
	}, eventually, tick, "held for what is left of Reloader's pause-period")
	require.Eventually(t, func() bool {
		return strings.Contains(p.Log(), `"config changed; rolling out" workload="deployment `+ns+`/users-own"`)
	}, eventually, tick, "the Deployment with no pause-period is written at once (the user keeps it paused)")
	assert.Equal(t, before, inputsHash(getDeployment(t, client, ns, "stranded")), "within the period: the change waits")
	assert.True(t, getDeployment(t, client, ns, "stranded").Spec.Paused, "within Reloader's pause-period (1h): still paused")
	rss, err := testcluster.ReplicaSets(ctx(t), client, getDeployment(t, client, ns, "stranded"))
	require.NoError(t, err)
	require.Len(t, rss, 1, "paused: the new template waits")

	// The hour goes by (the paused-at time moved back, as the clock would have).
	hourAgo := time.Now().Add(-time.Hour - time.Second).UTC().Format(time.RFC3339)
	_, err = client.AppsV1().Deployments(ns).Patch(ctx(t), "stranded", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+podrefs.StakaterPausedAt+`":"`+hourAgo+`"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !getDeployment(t, client, ns, "stranded").Spec.Paused }, eventually, tick, "resumed once the period is over: %s", p.Log())
	d := getDeployment(t, client, ns, "stranded")
	assert.NotContains(t, d.Annotations, podrefs.StakaterPausedAt, "Reloader's mark is removed, as its own resume does")
	require.Eventually(t, func() bool { return len(replicaSets(t, client, ns, "stranded")) == 2 }, eventually, tick,
		"the change held while paused rolls at once, not after a period of its own: %s", p.Log())
	assert.NotEmpty(t, events(t, client, ns, "stranded", "Resumed"))

	settle(t, p)
	assert.True(t, getDeployment(t, client, ns, "users-own").Spec.Paused, "a pause with no Reloader mark is the user's")
}
