package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testdisk"
)

// podEvent waits for a Warning Event with reason on the reloader's pod (POD_NAME, a Pod)
// whose message contains every part, and returns the message.
func podEvent(t *testing.T, client kubernetes.Interface, ns, pod, reason string, parts ...string) string {
	t.Helper()
	var msg string
	require.Eventually(t, func() bool {
		evs, err := client.CoreV1().Events(ns).List(ctx(t), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		require.NoError(t, err)
		for _, e := range evs.Items {
			if e.Reason != reason || e.Type != "Warning" || e.InvolvedObject.Kind != "Pod" {
				continue
			}
			all := true
			for _, part := range parts {
				all = all && strings.Contains(e.Message, part)
			}
			if all {
				msg = e.Message
				return true
			}
		}
		return false
	}, eventually, tick, "a %s Event on the pod containing %q", reason, parts)
	return msg
}

// A full volume, a read-only volume and a config file the app replaced with a folder: each
// gives a clear error (log, Event, alert metric, /status; still ready, serving the last good
// config), the last good config stays whole and
// readable, nothing half-written is left, and the reloader applies the latest config by itself
// once the disk is fixed.
func TestDiskTrouble(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := testdisk.Tmpfs(t, "256k")
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.conf": "v1", "data": "d1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	app := newFakeApp(t, filepath.Join(root, "app.conf"))
	p := startReloader(t, []string{"POD_NAME=app-0", "POD_NAMESPACE=" + ns}, "--configmap=app", "--configroot="+root,
		"--reload-http="+app.url(), "--reload-retry-interval=500ms")
	p.WaitReady(t)
	healthy := testdisk.Entries(t, root)
	failures := 0.0
	failed := func(step string) {
		t.Helper()
		failures++
		require.Eventually(t, func() bool { return p.Metric(`configwave_reloader_reloads_total{result="write_failed"}`) >= failures }, eventually, tick, step)
		assert.True(t, failingButReady(p), "%s: reported, and still ready with the last good config", step)
		assert.Equal(t, "write_failed", status(t, p).LastResult, step)
		assert.Equal(t, healthy, testdisk.Entries(t, root), "%s: nothing half-written is left", step)
	}

	t.Run("full volume", func(t *testing.T) {
		patchData(t, client, ns, "app", `{"data":{"app.conf":"v2","data":"`+strings.Repeat("x", 400<<10)+`"}}`)
		failed("full volume")
		podEvent(t, client, ns, "app-0", "ConfigWriteFailed", "no space left on device", "enlarge the volume under "+root)
		assert.Equal(t, "v1", readFile(root, "app.conf"), "the last good config stays")
		assert.Equal(t, "d1", readFile(root, "data"))
		assert.Empty(t, app.reloads(), "the app is not told about a config that is not on disk")

		testdisk.Resize(t, root, "2m")
		require.Eventually(t, func() bool { return upToDate(p) }, eventually, tick, "retried without a new change once there is room")
		require.Eventually(t, func() bool { return len(app.reloads()) == 1 }, eventually, tick)
		assert.Equal(t, "v2", app.reloads()[0])
		healthy = testdisk.Entries(t, root)
	})

	t.Run("read-only volume", func(t *testing.T) {
		onlyTheLiveSet(t, root)
		healthy = testdisk.Entries(t, root)
		testdisk.ReadOnly(t, root, true)
		patchData(t, client, ns, "app", `{"data":{"app.conf":"v3","data":"d3"}}`)
		failed("read-only volume")
		podEvent(t, client, ns, "app-0", "ConfigWriteFailed", "read-only file system", "volumeMount must be writable")
		assert.Equal(t, "v2", readFile(root, "app.conf"))
		assert.Len(t, app.reloads(), 1)

		testdisk.ReadOnly(t, root, false)
		require.Eventually(t, func() bool { return upToDate(p) }, eventually, tick)
		require.Eventually(t, func() bool { return len(app.reloads()) == 2 }, eventually, tick)
		assert.Equal(t, "v3", app.reloads()[1])
		assert.Equal(t, "d3", readFile(root, "data"))
		healthy = testdisk.Entries(t, root)
	})

	t.Run("a config file replaced by a folder", func(t *testing.T) {
		onlyTheLiveSet(t, root)
		require.NoError(t, os.Remove(filepath.Join(root, "app.conf")))
		require.NoError(t, os.Mkdir(filepath.Join(root, "app.conf"), 0o755))
		healthy = testdisk.Entries(t, root)
		patchData(t, client, ns, "app", `{"data":{"app.conf":"v4","data":"d4"}}`)
		failed("file replaced by a folder")
		podEvent(t, client, ns, "app-0", "ConfigWriteFailed", "app.conf under "+root+" is a folder that configwave did not write; move it away")
		assert.Equal(t, "d3", readFile(root, "data"), "all or nothing: the other file keeps the last set")
		assert.DirExists(t, filepath.Join(root, "app.conf"), "the app's folder is not removed")

		require.NoError(t, os.Remove(filepath.Join(root, "app.conf")))
		require.Eventually(t, func() bool { return upToDate(p) }, eventually, tick)
		require.Eventually(t, func() bool { return len(app.reloads()) == 3 }, eventually, tick)
		assert.Equal(t, "v4", app.reloads()[2])
		assert.Equal(t, "d4", readFile(root, "data"))
	})
	assert.False(t, p.Exited(), "disk trouble never stops the reloader")
}

// onlyTheLiveSet waits until the set a swap retired is removed (2 s after the swap), so that
// a listing taken now stays the same unless something is written.
func onlyTheLiveSet(t *testing.T, root string) {
	t.Helper()
	require.Eventually(t, func() bool { return len(hiddenFolders(t, root)) == 1 }, eventually, tick,
		"the retired set is removed after its grace: %v", hiddenFolders(t, root))
}

// In subprocess mode the app starts only on a complete first config: a read-only root keeps it
// from starting, with the reason in the log, until the root is writable.
func TestSubprocessWaitsForAWritableRoot(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := testdisk.Tmpfs(t, "1m")
	testdisk.ReadOnly(t, root, true)
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.conf": "v1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "app.out")
	self, err := os.Executable()
	require.NoError(t, err)
	p := startReloader(t, []string{"CONFIGWAVE_TEST_APP=trap", "APP_OUT=" + out, "CONFIG_FILE=" + filepath.Join(root, "app.conf")},
		"--configmap="+ns+"/app", "--configroot="+root, "--reload-retry-interval=500ms", "--", self)
	require.Eventually(t, func() bool { return strings.Contains(p.Log(), "is mounted read-only") }, eventually, tick)
	time.Sleep(time.Second)
	assert.NoFileExists(t, out, "the app must not start without its config")
	assert.False(t, p.Ready())

	testdisk.ReadOnly(t, root, false)
	require.Eventually(t, func() bool { b, _ := os.ReadFile(out); return string(b) == "start:v1\n" }, eventually, tick)
	p.WaitReady(t)
}

// An app that leaves orphans behind: with --subreaper they are re-parented to the reloader,
// and reaped when they exit, so no zombie is left.
func TestSubprocessOrphansAreReaped(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := t.TempDir()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.conf": "v1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	pidFile := filepath.Join(t.TempDir(), "orphan.pid")
	self, err := os.Executable()
	require.NoError(t, err)
	p := startReloader(t, []string{"CONFIGWAVE_TEST_APP=trap", "APP_OUT=" + filepath.Join(t.TempDir(), "app.out"),
		"CONFIG_FILE=" + filepath.Join(root, "app.conf"), "ORPHAN_PID_FILE=" + pidFile},
		"--configmap="+ns+"/app", "--configroot="+root, "--subreaper", "--", self)
	var orphan string
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(pidFile)
		orphan = strings.TrimSpace(string(b))
		return orphan != ""
	}, eventually, tick)
	status := func() string { b, _ := os.ReadFile("/proc/" + orphan + "/status"); return string(b) }
	// The pid file is written by the orphan's first parent, a shell that may not have exited
	// yet: until it has, the orphan's parent is that shell. Wait for the re-parenting.
	reparented := "\nPPid:\t" + strconv.Itoa(p.Cmd.Process.Pid) + "\n"
	require.Eventually(t, func() bool { return strings.Contains(status(), reparented) }, eventually, tick,
		"the orphan must become the reloader's child once its shell exits: %s", status())
	require.Eventually(t, func() bool { return status() == "" }, eventually, tick,
		"the orphan exits after 2 s and must be reaped, not left a zombie: %s", status())
	assert.False(t, p.Exited(), "an orphan's exit is not the app's exit")
}

// The reload endpoint first refuses connections (the app is not up), then hangs past the
// per-try timeout, then answers: the reloader retries with backoff, reports it meanwhile,
// and the app is finally told once the latest config is on disk; nothing is lost.
func TestReloadEndpointRefusesThenHangsThenRecovers(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := t.TempDir()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.conf": "v1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	addr := testcluster.FreeAddr(t) // nothing listens there yet
	p := startReloader(t, nil, "--configmap=app", "--namespace="+ns, "--configroot="+root, "--reload-http=http://"+addr+"/-/reload",
		"--reload-http-tries=2", "--reload-http-timeout=300ms", "--reload-retry-interval=500ms")
	p.WaitReady(t)

	patchData(t, client, ns, "app", `{"data":{"app.conf":"v2"}}`)
	require.Eventually(t, func() bool { return strings.Contains(p.Log(), "is the app listening on that address") }, eventually, tick)
	require.Eventually(t, func() bool { return failingButReady(p) }, eventually, tick, "reported while the app cannot be told")
	assert.Equal(t, "v2", readFile(root, "app.conf"), "the files are in place; only the notification is pending")

	// The app comes up but hangs on reload requests for a while.
	var hanging atomic.Bool
	hanging.Store(true)
	var mu sync.Mutex
	var seen []string
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hanging.Load() {
			select {
			case <-r.Context().Done(): // the reloader gave up on this try
			case <-time.After(5 * time.Second):
			}
			return
		}
		mu.Lock()
		seen = append(seen, readFile(root, "app.conf"))
		mu.Unlock()
	}))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	require.Eventually(t, func() bool { return strings.Contains(p.Log(), "deadline exceeded") }, eventually, tick,
		"a try against the hanging endpoint is cut at --reload-http-timeout")
	patchData(t, client, ns, "app", `{"data":{"app.conf":"v3"}}`)
	require.Eventually(t, func() bool { return readFile(root, "app.conf") == "v3" }, eventually, tick)
	assert.True(t, status(t, p).NotifyPending)

	hanging.Store(false)
	require.Eventually(t, func() bool { return upToDate(p) }, eventually, tick, "up to date once the app answers")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"v3"}, seen, "one reload, of the latest config")
	assert.EqualValues(t, 1, p.Metric(`configwave_reloader_reloads_total{result="success"}`))
}

// A change that lands while the app is still starting: without a startup grace the reload
// signal reaches the app before its handler and kills it (exit 129, as for any program); with
// the default grace the signal waits, and the app reloads the new config.
func TestSubprocessChangeWhileTheAppStarts(t *testing.T) {
	for _, tc := range []struct {
		grace    string
		survives bool
	}{{"--startup-grace=0", false}, {"--startup-grace=6s", true}} { // 6s: the app's 2 s before its handler, after a start that a busy machine slows by seconds
		t.Run(tc.grace, func(t *testing.T) {
			client := adminClient(t)
			ns := testcluster.Namespace(t, client)
			root := t.TempDir()
			_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.conf": "v1"}, nil), metav1.CreateOptions{})
			require.NoError(t, err)
			out := filepath.Join(t.TempDir(), "app.out")
			self, err := os.Executable()
			require.NoError(t, err)
			p := startReloader(t, []string{"CONFIGWAVE_TEST_APP=trap", "APP_OUT=" + out, "CONFIG_FILE=" + filepath.Join(root, "app.conf"), "HANDLER_DELAY=2s"},
				"--configmap="+ns+"/app", "--configroot="+root, "--debounce=0", tc.grace, "--", self)
			lines := func() []string { b, _ := os.ReadFile(out); return strings.Fields(string(b)) }
			require.Eventually(t, func() bool { return len(lines()) > 0 }, eventually, tick)
			require.Equal(t, []string{"boot:v1"}, lines(), "the app is up but has no handler yet")
			patchData(t, client, ns, "app", `{"data":{"app.conf":"v2"}}`)

			if !tc.survives {
				assert.Equal(t, 128+int(syscall.SIGHUP), p.Wait(t, eventually), "the early SIGHUP killed the app")
				return
			}
			require.Eventually(t, func() bool { return len(lines()) == 3 }, eventually, tick)
			assert.Equal(t, []string{"boot:v1", "start:v2", "hup:v2"}, lines(), "the app gets the signal once its handler is in place")
			assert.False(t, p.Exited())
		})
	}
}
