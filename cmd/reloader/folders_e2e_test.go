package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testvolume"
)

// noAPI is the environment of a reloader that must never talk to an API server: a kubeconfig
// that does not exist, and no in-cluster service. Making a client would fail the start.
var noAPI = []string{"KUBECONFIG=/does/not/exist", "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT="}

// startFolderReloader runs the reloader on mounted folders with the arguments given, and a
// loopback address under configmap-reload's flag name.
func startFolderReloader(t testing.TB, env []string, args ...string) *testcluster.Process {
	t.Helper()
	return startFolderReloaderAt(t, env, "--web.listen-address", args...)
}

// startFolderReloaderAt is startFolderReloader with the listen address under listenFlag.
func startFolderReloaderAt(t testing.TB, env []string, listenFlag string, args ...string) *testcluster.Process {
	t.Helper()
	if reloaderBin == "" {
		t.Skip("needs the reloader binary; skipped in -short mode")
	}
	addr := testcluster.FreeAddr(t)
	p := testcluster.StartProcess(t, reloaderBin, append(append([]string{}, noAPI...), env...), append([]string{listenFlag + "=" + addr, "--v=2"}, args...)...)
	p.Addr = addr
	p.WaitReady(t)
	return p
}

// A configmap-reload sidecar's arguments, exactly as the Prometheus community chart renders
// them, with only the image changed: nothing is sent at start, one request per swap, sent on the
// swap as configmap-reload sends it (so one for a swap to the same files too, which kubelet
// never makes), a burst is merged and ends on its last content, basic auth from the URL is sent
// and never shown, and configmap-reload's series count it all.
func TestConfigmapReloadDropIn(t *testing.T) {
	dir := t.TempDir()
	vol := testvolume.New(dir)
	require.NoError(t, vol.Write(map[string]string{"prometheus.yml": "v1"}))

	var mu sync.Mutex
	var seen []string
	var auth []string
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := os.ReadFile(filepath.Join(dir, "prometheus.yml"))
		if err != nil {
			b = []byte("<" + err.Error() + ">")
		}
		user, pass, _ := r.BasicAuth()
		mu.Lock()
		seen = append(seen, r.Method+" "+string(b))
		auth = append(auth, user+":"+pass)
		mu.Unlock()
	}))
	t.Cleanup(app.Close)
	requests := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), seen...) }
	hook := strings.Replace(app.URL, "http://", "http://admin:hunter2pass@", 1) + "/-/reload"
	shown := strings.Replace(app.URL, "http://", "http://admin:xxxxx@", 1) + "/-/reload"

	p := startFolderReloader(t, nil, "--volume-dir="+dir, "--webhook-url="+hook)
	time.Sleep(300 * time.Millisecond)
	assert.Empty(t, requests(), "configmap-reload sends nothing at start")

	require.NoError(t, vol.Write(map[string]string{"prometheus.yml": "v2"}))
	require.Eventually(t, func() bool { return len(requests()) == 1 }, eventually, tick)
	assert.Equal(t, []string{"POST v2"}, requests(), "the app is told once the new file is in place")

	time.Sleep(200 * time.Millisecond) // past --debounce (100 ms): a swap of its own, not of a burst
	require.NoError(t, vol.Write(map[string]string{"prometheus.yml": "v2"}))
	time.Sleep(500 * time.Millisecond)
	assert.Equal(t, []string{"POST v2", "POST v2"}, requests(), "a swap is told as it is seen, before it is read, and once")

	for i := 3; i <= 12; i++ {
		require.NoError(t, vol.Write(map[string]string{"prometheus.yml": fmt.Sprintf("v%d", i)}))
	}
	require.Eventually(t, func() bool { r := requests(); return r[len(r)-1] == "POST v12" }, eventually, tick, "the burst ends on its last content")
	time.Sleep(300 * time.Millisecond)
	n := len(requests())
	assert.Less(t, n, 1+10, "a burst of 10 swaps is merged: %v", requests())
	mu.Lock()
	for _, a := range auth {
		assert.Equal(t, "admin:hunter2pass", a, "user:password@ in the URL is sent as basic auth")
	}
	mu.Unlock()

	label := `{webhook="` + shown + `"}`
	assert.EqualValues(t, n, p.Metric("configmap_reload_success_reloads_total"+label))
	assert.EqualValues(t, n, p.Metric(`configmap_reload_requests_total{status_code="200",webhook="`+shown+`"}`))
	assert.EqualValues(t, 0, p.Metric("configmap_reload_last_reload_error"+label))
	assert.EqualValues(t, 0, p.Metric("configmap_reload_watcher_errors_total"))
	assert.GreaterOrEqual(t, p.Metric("configmap_reload_last_request_duration_seconds"+label), 0.0)
	assert.EqualValues(t, 1, p.Metric("configwave_reloader_last_reload_successful"))
	assert.NotContains(t, p.Log(), "hunter2pass", "the password is never logged")
	procs := 1.0 // GOMAXPROCS, when the test runs with it, is the reloader's too, and wins
	if v, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err == nil {
		procs = float64(v)
	}
	assert.EqualValues(t, procs, p.Metric("go_sched_gomaxprocs_threads"), "one core unless GOMAXPROCS says otherwise")
	code, body := p.Get("/metrics")
	require.Equal(t, 200, code)
	assert.NotContains(t, body, "hunter2pass")
}

// Several webhook URLs are each told, each with its own retries: one that keeps failing does
// not keep the other from its reload, and is counted as configmap-reload counts it.
func TestEveryWebhookURLIsTold(t *testing.T) {
	dir := t.TempDir()
	vol := testvolume.New(dir)
	require.NoError(t, vol.Write(map[string]string{"a": "v1"}))
	good := newFakeApp(t, filepath.Join(dir, "a"))
	bad := newFakeApp(t, filepath.Join(dir, "a"))
	bad.status = func(int) int { return http.StatusInternalServerError }
	p := startFolderReloader(t, nil, "--volume-dir="+dir, "--webhook-url="+good.url(), "--webhook-url="+bad.url(),
		"--webhook-retries=2", "--reload-retry-interval=1h")
	require.NoError(t, vol.Write(map[string]string{"a": "v2"}))
	require.Eventually(t, func() bool { return len(bad.reloads()) == 2 }, eventually, tick)
	assert.Equal(t, []string{"v2"}, good.reloads())
	require.Eventually(t, func() bool {
		return p.Metric(`configmap_reload_request_errors_total{reason="retries_exhausted",webhook="`+bad.url()+`"}`) == 1
	}, eventually, tick)
	assert.EqualValues(t, 2, p.Metric(`configmap_reload_request_errors_total{reason="client_response",webhook="`+bad.url()+`"}`))
	assert.EqualValues(t, 1, p.Metric(`configmap_reload_last_reload_error{webhook="`+bad.url()+`"}`))
	assert.EqualValues(t, 0, p.Metric(`configmap_reload_last_reload_error{webhook="`+good.url()+`"}`))
	assert.EqualValues(t, 0, p.Metric("configwave_reloader_last_reload_successful"), "an endpoint that was not told is a failed reload")
}

// Subprocess mode on a mounted folder, with a check: the app starts once the folder was read,
// a set the check rejects is never signalled, and the next good one is.
func TestFolderSubprocessWithCheck(t *testing.T) {
	dir := t.TempDir()
	vol := testvolume.New(dir)
	require.NoError(t, vol.Write(map[string]string{"app.conf": "good-1"}))
	out := filepath.Join(t.TempDir(), "app.out")
	self, err := os.Executable()
	require.NoError(t, err)
	p := startFolderReloader(t, []string{"CONFIGWAVE_TEST_APP=1", "APP_OUT=" + out, "CONFIG_FILE=" + filepath.Join(dir, "app.conf")},
		"--volume-dir="+dir, "--startup-grace=0", `--validate-command=grep -q good "$CONFIG_DIR/app.conf"`, "--", self)
	appLog := func() string { b, _ := os.ReadFile(out); return string(b) }
	require.Eventually(t, func() bool { return appLog() == "start:good-1\n" }, eventually, tick)

	require.NoError(t, vol.Write(map[string]string{"app.conf": "bad"}))
	require.Eventually(t, func() bool { return p.Metric(`configwave_reloader_reloads_total{result="validation_failed"}`) == 1 }, eventually, tick)
	assert.Equal(t, "start:good-1\n", appLog(), "a rejected set is never signalled")
	assert.True(t, failingButReady(p))

	require.NoError(t, vol.Write(map[string]string{"app.conf": "good-2"}))
	require.Eventually(t, func() bool { return appLog() == "start:good-1\nhup:good-2\n" }, eventually, tick)
	require.Eventually(t, func() bool { return upToDate(p) }, eventually, tick)
}

// --log-format=json, as prometheus-config-reloader and Stakater Reloader take it: every line the
// reloader writes is one JSON object with its time, level and message, --v included.
func TestJSONLogs(t *testing.T) {
	dir := t.TempDir()
	vol := testvolume.New(dir)
	require.NoError(t, vol.Write(map[string]string{"a": "1"}))
	app := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(app.Close)
	p := startFolderReloader(t, nil, "--volume-dir="+dir, "--webhook-url="+app.URL, "--log-format=json")
	require.NoError(t, vol.Write(map[string]string{"a": "2"}))
	require.Eventually(t, func() bool { return strings.Contains(p.Log(), `"msg":"app reloaded"`) }, eventually, tick, p.Log())
	lines := strings.Split(strings.TrimSpace(p.Log()), "\n")
	require.GreaterOrEqual(t, len(lines), 3)
	for _, line := range lines {
		var entry map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &entry), "not one JSON object: %q", line)
		assert.NotEmpty(t, entry["time"], line)
		assert.NotEmpty(t, entry["level"], line)
		assert.NotEmpty(t, entry["msg"], line)
	}
}
