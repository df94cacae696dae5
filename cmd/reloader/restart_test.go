package main

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// kubelet restarts a sidecar (OOM, liveness) while the app and the shared emptyDir stay. A
// restarted reloader that finds an older set tells the app once; one that finds the current
// set sends nothing. Twenty restarts with a change each leave the live set and at most the
// one before it on disk, so old Secret values do not pile up in the volume.
func TestSidecarRestartTellsTheAppOnceAndLeavesNoOldSets(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := t.TempDir()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.conf": "v0"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	app := newFakeApp(t, root+"/app.conf")
	start := func() *testcluster.Process {
		p := startReloader(t, nil, "--configmap="+ns+"/app", "--configroot="+root, "--reload-http="+app.url())
		p.WaitReady(t)
		return p
	}

	p := start()
	p.Kill()
	p = start()
	time.Sleep(300 * time.Millisecond)
	assert.Empty(t, app.reloads(), "same set on disk after a restart: the app is not told")
	p.Kill()

	for i := 1; i <= 20; i++ {
		v := "v" + strconv.Itoa(i)
		patchData(t, client, ns, "app", `{"data":{"app.conf":"`+v+`"}}`) // while no reloader runs
		p = start()
		require.Eventually(t, func() bool { return len(app.reloads()) == i }, eventually, tick, "restart %d: the app is told once", i)
		assert.Equal(t, v, app.reloads()[i-1], "the app sees the new file when told")
		p.Kill() // as the OOM killer would: no clean-up on the way out
		folders := hiddenFolders(t, root)
		assert.LessOrEqual(t, len(folders), 2, "restart %d: the live set and at most the one before it: %v", i, folders)
	}
	assert.Len(t, app.reloads(), 20, "exactly one reload per restart with a change")
}

func hiddenFolders(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "..") {
			names = append(names, e.Name())
		}
	}
	return names
}

// --unhealthy-after: an app that keeps failing to reload fails /healthz after that long, so
// kubelet restarts the pod; /status says why; it passes again once the app takes the config.
func TestUnhealthyAfterAnAppKeepsFailingToReload(t *testing.T) {
	client, ns, root, app, refuse := refusingAppSetUp(t)
	refuse.Store(true)
	p := startReloader(t, nil, "--configmap="+ns+"/app", "--configroot="+root, "--reload-http="+app.url(),
		"--reload-http-tries=1", "--reload-retry-interval=200ms", "--unhealthy-after=1s")
	p.WaitReady(t)
	code, _ := p.Get("/healthz")
	assert.Equal(t, http.StatusOK, code)

	patchData(t, client, ns, "app", `{"data":{"app.conf":"v2"}}`)
	var body string
	require.Eventually(t, func() bool { code, body = p.Get("/healthz"); return code == http.StatusServiceUnavailable }, eventually, tick)
	assert.Contains(t, body, "--unhealthy-after=1s")
	assert.Contains(t, body, "500 Internal Server Error")
	assert.True(t, p.Ready(), "readiness is not what restarts a pod")
	assert.Contains(t, status(t, p).ReloadError, "500 Internal Server Error")

	refuse.Store(false)
	require.Eventually(t, func() bool { code, _ := p.Get("/healthz"); return code == http.StatusOK }, eventually, tick)
	assert.Equal(t, "v2", app.reloads()[len(app.reloads())-1])
}

// The app refused a set, and kubelet restarted the sidecar (what --unhealthy-after asks for).
// The files on disk already equal the ConfigMap, but the record beside them says the app never
// took them: the restarted reloader tells it again. Once it has, a further restart tells nobody.
func TestRestartAfterAFailedReloadTellsTheAppAgain(t *testing.T) {
	client, ns, root, app, refuse := refusingAppSetUp(t)
	start := func() *testcluster.Process {
		p := startReloader(t, nil, "--configmap="+ns+"/app", "--configroot="+root, "--reload-http="+app.url(), "--reload-http-tries=1")
		p.WaitReady(t)
		return p
	}
	p := start()
	refuse.Store(true)
	patchData(t, client, ns, "app", `{"data":{"app.conf":"v2"}}`)
	require.Eventually(t, func() bool { return status(t, p).ReloadError != "" }, eventually, tick, "the app refused v2: %s", p.Log())
	p.Kill()

	refuse.Store(false)
	told := len(app.reloads())
	p = start()
	require.Eventually(t, func() bool { return len(app.reloads()) == told+1 }, eventually, tick, "the app is told again: %s", p.Log())
	assert.Equal(t, "v2", app.reloads()[told])
	assert.Contains(t, p.Log(), "the app had not taken the config")
	p.Kill()

	p = start()
	time.Sleep(300 * time.Millisecond)
	assert.Len(t, app.reloads(), told+1, "the app has v2: a restart tells nobody")
	p.Kill()
}

// refusingAppSetUp makes a namespace with ConfigMap app (app.conf: v1), a config root, and an
// app that answers its reload requests with 500 while refuse is set.
func refusingAppSetUp(t *testing.T) (client kubernetes.Interface, ns, root string, app *fakeApp, refuse *atomic.Bool) {
	client = adminClient(t)
	ns = testcluster.Namespace(t, client)
	root = t.TempDir()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.conf": "v1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	app = newFakeApp(t, root+"/app.conf")
	refuse = &atomic.Bool{}
	app.status = func(int) int {
		if refuse.Load() {
			return 500
		}
		return 200
	}
	return client, ns, root, app, refuse
}

// A sidecar restarted while its ConfigMap holds a config the check rejects: the good set its
// predecessor made live stays, and the reloader is ready, as /readyz promises, rather than
// held out of the Service until someone fixes the ConfigMap.
func TestRestartWithRejectedSourcesIsReady(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := t.TempDir()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.conf": "good"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	app := newFakeApp(t, root+"/app.conf")
	start := func() *testcluster.Process {
		return startReloader(t, nil, "--configmap="+ns+"/app", "--configroot="+root, "--reload-http="+app.url(),
			"--validate-command=! grep -q bad \"$CONFIG_DIR/app.conf\"")
	}
	p := start()
	p.WaitReady(t)
	p.Kill()
	patchData(t, client, ns, "app", `{"data":{"app.conf":"bad"}}`)
	p = start()
	require.Eventually(t, func() bool { return p.Metric(`configwave_reloader_reloads_total{result="validation_failed"}`) == 1 }, eventually, tick, p.Log())
	p.WaitReady(t)
	assert.Equal(t, "good", readFile(root, "app.conf"), "the last good set stays live")
}
