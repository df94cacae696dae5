package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testvolume"
)

// These tests run the reloader binary against the real control plane (see TestMain).

func configMap(ns, name string, data map[string]string, binary map[string][]byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data, BinaryData: binary}
}

func patchData(t testing.TB, client kubernetes.Interface, ns, name, patch string) {
	t.Helper()
	_, err := client.CoreV1().ConfigMaps(ns).Patch(ctx(t), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

func TestSidecarFollowsKeysAndBinaryData(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "mine.txt"), []byte("not the reloader's"), 0o644))
	blob := []byte{0, 1, 2, 0xfe, 0xff, '\n'}
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.yaml": "v: 1", "old.conf": "x"}, map[string][]byte{"blob.bin": blob}), metav1.CreateOptions{})
	require.NoError(t, err)

	app := newFakeApp(t, filepath.Join(root, "app.yaml"))
	p := startReloader(t, nil, "--namespace="+ns, "--configmap=app", "--configroot="+root, "--reload-http="+app.url(),
		"--reload-http-method=PUT", "--reload-http-header=X-Reload-Token: t0k3n")
	p.WaitReady(t)
	assert.Equal(t, "v: 1", readFile(root, "app.yaml"))
	assert.Equal(t, string(blob), readFile(root, "blob.bin"), "binaryData is byte-exact")
	info, err := os.Stat(filepath.Join(root, "app.yaml"))
	require.NoError(t, err)
	assert.EqualValues(t, 0o644, info.Mode().Perm())
	assert.Empty(t, app.reloads(), "the first set is read by the app at start; no reload request")

	// Change a key: the request arrives after the new file is in place.
	patchData(t, client, ns, "app", `{"data":{"app.yaml":"v: 2"}}`)
	require.Eventually(t, func() bool { return len(app.reloads()) == 1 }, eventually, tick)
	assert.Equal(t, []string{"v: 2"}, app.reloads(), "the app must see the new file when told")
	assert.Equal(t, "PUT", app.method)
	assert.Equal(t, "t0k3n", app.header.Get("X-Reload-Token"))

	// Add one key and remove another in one change.
	patchData(t, client, ns, "app", `{"data":{"new.conf":"n","old.conf":null}}`)
	require.Eventually(t, func() bool { return len(app.reloads()) == 2 }, eventually, tick)
	assert.Equal(t, "n", readFile(root, "new.conf"))
	assert.NoFileExists(t, filepath.Join(root, "old.conf"), "a removed key's file disappears")

	// Metadata only: no write, no reload.
	_, err = client.CoreV1().ConfigMaps(ns).Patch(ctx(t), "app", types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	time.Sleep(time.Second)
	assert.Len(t, app.reloads(), 2, "a metadata-only update must not reload")
	assert.Equal(t, "not the reloader's", readFile(root, "mine.txt"), "files the reloader did not write are never touched")
	assert.EqualValues(t, 2, p.Metric(`configwave_reloader_reloads_total{result="success"}`))
	assert.EqualValues(t, 2, p.Metric(`configwave_reloader_reload_duration_seconds_count`), "two changes told, each with its latency")
	// Every series of the metrics reference is exported, under its documented name.
	documented, err := testcluster.DocumentedMetrics(filepath.Join("..", "..", "docs", "metrics.md"), "reloader")
	require.NoError(t, err)
	exported := p.MetricNames()
	for _, name := range documented {
		assert.True(t, exported[name], "docs/metrics.md lists %s, which the reloader does not export", name)
	}
	assert.Greater(t, p.Metric("configwave_reloader_last_reload_success_timestamp_seconds"), float64(0))
	assert.NotContains(t, p.Log(), "t0k3n", "a header value never reaches the log")

	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, p.Wait(t, 20*time.Second), "a sidecar stops cleanly on SIGTERM")
}

func TestSecretFilesAreOwnerOnly(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := t.TempDir()
	_, err := client.CoreV1().Secrets(ns).Create(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls"},
		Data: map[string][]byte{"tls.key": []byte("s3cr3t-key")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	p := startReloader(t, nil, "--secret="+ns+"/tls", "--configroot="+root)
	p.WaitReady(t)
	assert.Equal(t, "s3cr3t-key", readFile(root, "tls.key"))
	info, err := os.Stat(filepath.Join(root, "tls.key"))
	require.NoError(t, err)
	assert.EqualValues(t, 0o600, info.Mode().Perm())

	_, err = client.CoreV1().Secrets(ns).Patch(ctx(t), "tls", types.MergePatchType, []byte(`{"stringData":{"tls.key":"s3cr3t-key-2"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return readFile(root, "tls.key") == "s3cr3t-key-2" }, eventually, tick)
	assert.NotContains(t, p.Log(), "s3cr3t", "no secret value in the log")
}

func TestBurstOfPatchesGivesFinalContentAndFewReloads(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := t.TempDir()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"n": "0"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	app := newFakeApp(t, filepath.Join(root, "n"))
	p := startReloader(t, nil, "--configmap="+ns+"/app", "--configroot="+root, "--reload-http="+app.url(), "--debounce=200ms")
	p.WaitReady(t)

	for i := 1; i <= 50; i++ {
		patchData(t, client, ns, "app", fmt.Sprintf(`{"data":{"n":"%d"}}`, i))
	}
	require.Eventually(t, func() bool {
		r := app.reloads()
		return len(r) > 0 && r[len(r)-1] == "50"
	}, eventually, tick, "the last reload must see the final content")
	time.Sleep(time.Second)
	reloads := app.reloads()
	assert.Equal(t, "50", readFile(root, "n"))
	assert.LessOrEqual(t, len(reloads), 10, "50 patches within the debounce window coalesce: got %d reloads", len(reloads))
	t.Logf("50 patches gave %d reloads", len(reloads))
}

func TestReloadEndpointFailsThenRecovers(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := t.TempDir()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.yaml": "v1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	app := newFakeApp(t, filepath.Join(root, "app.yaml"))
	app.status = func(n int) int {
		if n <= 4 {
			return 503
		}
		return 200
	}
	p := startReloader(t, nil, "--configmap="+ns+"/app", "--configroot="+root, "--reload-http="+app.url(),
		"--reload-http-tries=2", "--reload-retry-interval=1s")
	p.WaitReady(t)

	patchData(t, client, ns, "app", `{"data":{"app.yaml":"v2"}}`)
	require.Eventually(t, func() bool { return p.Metric(`configwave_reloader_reloads_total{result="notify_failed"}`) >= 1 }, eventually, tick)
	assert.True(t, failingButReady(p), "a failing reload shows in the alert metric, never in readiness")
	assert.True(t, status(t, p).NotifyPending)
	// Tries 1-2 fail, the retry after 1 s fails twice more, the next retry succeeds.
	require.Eventually(t, func() bool { return upToDate(p) }, eventually, tick, "up to date once the app answers")
	assert.False(t, status(t, p).NotifyPending)
	assert.Len(t, app.reloads(), 5)
	assert.Equal(t, "v2", app.reloads()[4])
	assert.EqualValues(t, 1, p.Metric(`configwave_reloader_reloads_total{result="success"}`))
	assert.Contains(t, p.Log(), "503 Service Unavailable")
}

func TestValidateCommandRejectsBadConfig(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := t.TempDir()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.conf": "good 1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	app := newFakeApp(t, filepath.Join(root, "app.conf"))
	p := startReloader(t, []string{"POD_NAME=app-0", "POD_NAMESPACE=" + ns},
		"--configmap=app", "--configroot="+root, "--reload-http="+app.url(),
		`--validate-command=grep -q '^good' "$CONFIG_DIR/app.conf"`)
	p.WaitReady(t)

	patchData(t, client, ns, "app", `{"data":{"app.conf":"broken"}}`)
	require.Eventually(t, func() bool { return status(t, p).LastResult == "validation_failed" }, eventually, tick)
	assert.True(t, failingButReady(p), "every replica rejects the same ConfigMap: readiness must not follow, or the Service goes down")
	assert.Contains(t, status(t, p).LastError, "validation command rejected")
	assert.Equal(t, "good 1", readFile(root, "app.conf"), "the app keeps the last good config")
	assert.Empty(t, app.reloads())
	assert.EqualValues(t, 1, p.Metric(`configwave_reloader_reloads_total{result="validation_failed"}`))
	podEvent(t, client, ns, "app-0", "ConfigRejected") // a rejection is a Warning Event on the pod
	assert.Contains(t, p.Log(), "validation command rejected")

	patchData(t, client, ns, "app", `{"data":{"app.conf":"good 2"}}`)
	require.Eventually(t, func() bool { return upToDate(p) }, eventually, tick)
	require.Eventually(t, func() bool { return len(app.reloads()) == 1 }, eventually, tick)
	assert.Equal(t, "good 2", app.reloads()[0])
}

func TestSubprocessStartsAfterUnpackReloadsOnHUPAndForwardsTERM(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := t.TempDir()
	out := filepath.Join(t.TempDir(), "app.out")
	self, err := os.Executable()
	require.NoError(t, err)
	env := []string{"CONFIGWAVE_TEST_APP=trap", "APP_OUT=" + out, "CONFIG_FILE=" + filepath.Join(root, "app.conf"), "TERM_EXIT=7"}

	// The ConfigMap does not exist yet: the app must not start without its config.
	p := startReloader(t, env, "--configmap="+ns+"/app", "--configroot="+root, "--", self)
	time.Sleep(time.Second)
	assert.NoFileExists(t, out, "the app started before its config existed")
	assert.False(t, p.Ready())

	_, err = client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.conf": "v1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	p.WaitReady(t)
	appLines := func() []string {
		b, _ := os.ReadFile(out)
		return strings.Fields(string(b))
	}
	require.Eventually(t, func() bool { return len(appLines()) == 1 }, eventually, tick)
	assert.Equal(t, []string{"start:v1"}, appLines())

	patchData(t, client, ns, "app", `{"data":{"app.conf":"v2"}}`)
	require.Eventually(t, func() bool { return len(appLines()) == 2 }, eventually, tick)
	assert.Equal(t, "hup:v2", appLines()[1], "the app sees the new file when it gets HUP")

	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 7, p.Wait(t, 20*time.Second), "the reloader exits with the app's exit code")
	assert.Equal(t, "term", appLines()[2], "SIGTERM is forwarded to the app")
}

func TestSubprocessExitCodeWhenTheAppDies(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := t.TempDir()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.conf": "v1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	self, err := os.Executable()
	require.NoError(t, err)
	p := startReloader(t, []string{"CONFIGWAVE_TEST_APP=exit", "EXIT_NOW=42"}, "--configmap="+ns+"/app", "--configroot="+root, "--", self)
	assert.Equal(t, 42, p.Wait(t, 30*time.Second), "fail fast with the app's code")
}

func TestDeletedAndRecreatedConfigMap(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := t.TempDir()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.yaml": "v1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	app := newFakeApp(t, filepath.Join(root, "app.yaml"))
	p := startReloader(t, []string{"POD_NAME=app-0", "POD_NAMESPACE=" + ns}, "--configmap=app", "--configroot="+root, "--reload-http="+app.url())
	p.WaitReady(t)

	require.NoError(t, client.CoreV1().ConfigMaps(ns).Delete(ctx(t), "app", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return strings.Contains(p.Log(), "source deleted") }, eventually, tick)
	assert.Equal(t, "v1", readFile(root, "app.yaml"), "the last config stays while the ConfigMap is gone")
	assert.Empty(t, app.reloads())

	_, err = client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.yaml": "v2"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(app.reloads()) == 1 }, eventually, tick)
	assert.Equal(t, "v2", app.reloads()[0])
}

func TestSelectorPerObjectAndFlatClash(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	labelled := func(name string, data map[string]string) *corev1.ConfigMap {
		cm := configMap(ns, name, data, nil)
		cm.Labels = map[string]string{"grafana_dashboard": "1"}
		return cm
	}
	for _, cm := range []*corev1.ConfigMap{
		labelled("dash-a", map[string]string{"a.json": "{\"a\":1}"}),
		labelled("dash-b", map[string]string{"b.json": "{\"b\":1}"}),
		configMap(ns, "unlabelled", map[string]string{"c.json": "{}"}, nil),
	} {
		_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), cm, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	t.Run("per-object", func(t *testing.T) {
		root := t.TempDir()
		p := startReloader(t, nil, "--namespace="+ns, "--selector=grafana_dashboard=1", "--layout=per-object", "--configroot="+root)
		p.WaitReady(t)
		assert.Equal(t, `{"a":1}`, readFile(root, "dash-a/a.json"))
		assert.Equal(t, `{"b":1}`, readFile(root, "dash-b/b.json"))
		assert.NoDirExists(t, filepath.Join(root, "unlabelled"))

		_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), labelled("dash-c", map[string]string{"c.json": "{}"}), metav1.CreateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return readFile(root, "dash-c/c.json") == "{}" }, eventually, tick)
		require.NoError(t, client.CoreV1().ConfigMaps(ns).Delete(ctx(t), "dash-c", metav1.DeleteOptions{}))
		require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(root, "dash-c")); return os.IsNotExist(err) }, eventually, tick,
			"a selected object that is deleted takes its files with it")
	})

	t.Run("flat clash: the object at fault is left out, the others keep updating", func(t *testing.T) {
		root := t.TempDir()
		p := startReloader(t, nil, "--namespace="+ns, "--selector=grafana_dashboard=1", "--configroot="+root)
		p.WaitReady(t)
		assert.Equal(t, `{"a":1}`, readFile(root, "a.json"))
		_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), labelled("dash-clash", map[string]string{"a.json": "other", "clash.json": "{}"}), metav1.CreateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			return strings.Contains(p.Log(), fmt.Sprintf(`configmap %s/dash-a key \"a.json\" and configmap %s/dash-clash key \"a.json\" would both unpack to \"a.json\"`, ns, ns))
		}, eventually, tick)
		assert.Equal(t, `{"a":1}`, readFile(root, "a.json"), "no silent overwrite: dash-a, first in order, keeps it")
		assert.NoFileExists(t, filepath.Join(root, "clash.json"), "never half an object")
		assert.True(t, upToDate(p), "a left-out object is not a failed set")
		assert.Equal(t, 1.0, p.Metric("configwave_reloader_objects_left_out"))
		require.NoError(t, client.CoreV1().ConfigMaps(ns).Delete(ctx(t), "dash-clash", metav1.DeleteOptions{}))
		require.Eventually(t, func() bool { return p.Metric("configwave_reloader_objects_left_out") == 0 }, eventually, tick)
	})
}

// Selector mode with 50 good dashboards, one that clashes with a good one and one whose key
// would land where another's file is: those two are left out (a Warning Event each on the
// reloader's pod, the metric, /status), and a change to a good one still lands and is told.
func TestSelectorIsolatesObjectsThatCannotBeLaidOut(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	label := map[string]string{"grafana_dashboard": "1"}
	create := func(name string, data map[string]string) {
		t.Helper()
		cm := configMap(ns, name, data, nil)
		cm.Labels = label
		_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), cm, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for i := range 50 {
		create(fmt.Sprintf("dash-%02d", i), map[string]string{fmt.Sprintf("d%02d.json", i): fmt.Sprintf(`{"v":%d}`, i)})
	}
	create("dash-07-copy", map[string]string{"d07.json": `{"copy":true}`})
	create("dash-nested", map[string]string{"panel": "{}"}) // --items puts it under d03.json, a file
	root := t.TempDir()
	app := newFakeApp(t, filepath.Join(root, "d21.json"))
	p := startReloader(t, []string{"POD_NAME=grafana-0", "POD_NAMESPACE=" + ns}, "--namespace="+ns, "--selector=grafana_dashboard=1",
		"--configroot="+root, "--items=panel=d03.json/panel.json", "--reload-http="+app.url())
	p.WaitReady(t)
	assert.Equal(t, `{"v":7}`, readFile(root, "d07.json"))
	assert.Equal(t, `{"v":49}`, readFile(root, "d49.json"))
	podEvent(t, client, ns, "grafana-0", "ConfigLeftOut", ns+"/dash-07-copy left out", `would both unpack to "d07.json"`)
	podEvent(t, client, ns, "grafana-0", "ConfigLeftOut", ns+"/dash-nested left out", `needs a folder at "d03.json"`)
	assert.Equal(t, 2.0, p.Metric("configwave_reloader_objects_left_out"))
	var st struct {
		LeftOut []string `json:"leftOut"`
	}
	_, body := p.Get("/status")
	require.NoError(t, json.Unmarshal([]byte(body), &st), body)
	assert.Len(t, st.LeftOut, 2)

	before := len(app.reloads())
	_, err := client.CoreV1().ConfigMaps(ns).Patch(ctx(t), "dash-21", types.MergePatchType, []byte(`{"data":{"d21.json":"{\"v\":2100}"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return readFile(root, "d21.json") == `{"v":2100}` }, eventually, tick, "a change to a good object lands")
	require.Eventually(t, func() bool { r := app.reloads(); return len(r) > before && r[len(r)-1] == `{"v":2100}` }, eventually, tick, "and the app is told, with the change on disk")
	assert.True(t, upToDate(p))
	assert.Equal(t, `{"v":7}`, readFile(root, "d07.json"))
}

func TestItemsPlaceKeysAtNestedPaths(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := t.TempDir()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "nginx", map[string]string{"nginx.conf": "events {}", "site": "server {}"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	p := startReloader(t, nil, "--configmap="+ns+"/nginx", "--configroot="+root, "--items=site=conf.d/site.conf", "--items=stie=conf.d/typo.conf")
	p.WaitReady(t)
	assert.Equal(t, "events {}", readFile(root, "nginx.conf"))
	assert.Equal(t, "server {}", readFile(root, "conf.d/site.conf"))
	assert.NoFileExists(t, filepath.Join(root, "site"))
	assert.Contains(t, p.Log(), `"warning: --items names keys that no source has; check their spelling" keys="stie"`)
}

func TestOnce(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.yaml": "v1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)

	root := t.TempDir()
	p := startReloader(t, nil, "--configmap="+ns+"/app", "--configroot="+root, "--once")
	assert.Equal(t, 0, p.Wait(t, 30*time.Second))
	assert.Equal(t, "v1", readFile(root, "app.yaml"))

	p = startReloader(t, nil, "--configmap="+ns+"/missing", "--configroot="+t.TempDir(), "--once")
	assert.Equal(t, 1, p.Wait(t, 30*time.Second))
	assert.Contains(t, p.Log(), fmt.Sprintf("configmap %s/missing not found: create it, or fix --configmap/--secret", ns))
}

// The reloader needs only get/list/watch on the named object: it runs under the Role we ship
// in config/reloader-rbac (resourceNames: app-config), and cannot read anything else.
func TestRunsWithTheShippedResourceNameRole(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app-config", map[string]string{"app.yaml": "v1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "other", map[string]string{"x": "not-yours"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)

	applyReloaderRBAC(t, client, ns)
	tok, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx(t), "configwave-reloader", &authv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	kubeconfig, err := cluster.KubeconfigFor(t.TempDir(), tok.Status.Token)
	require.NoError(t, err)

	root := t.TempDir()
	app := newFakeApp(t, filepath.Join(root, "app.yaml"))
	p := startReloader(t, []string{"POD_NAME=app-0", "POD_NAMESPACE=" + ns}, "--kubeconfig="+kubeconfig, "--configmap=app-config", "--configroot="+root, "--reload-http="+app.url())
	p.WaitReady(t)
	patchData(t, client, ns, "app-config", `{"data":{"app.yaml":"v2"}}`)
	require.Eventually(t, func() bool { return len(app.reloads()) == 1 }, eventually, tick)
	assert.Equal(t, "v2", app.reloads()[0])

	denied := startReloader(t, nil, "--kubeconfig="+kubeconfig, "--configmap="+ns+"/other", "--configroot="+t.TempDir())
	require.Eventually(t, func() bool { return strings.Contains(denied.Log(), "forbidden") }, eventually, tick)
	assert.False(t, denied.Ready(), "a ConfigMap outside resourceNames is never read")
	assert.NotContains(t, denied.Log(), "not-yours")
}

// Restarts the API server the package's tests share, while changes keep coming; it waits until
// the server is back, so the tests after it run normally.
func TestZZAPIServerRestartMidRun(t *testing.T) {
	changesAcrossAnOutage(t, func() { require.NoError(t, cluster.RestartAPIServer(ctx(t))) },
		func(p *testcluster.Process, ns string) {
			assert.GreaterOrEqual(t, p.Metric(`configwave_reloader_watch_restarts_total{source="configmap `+ns+`/app"}`), float64(1))
		})
}

// changesAcrossAnOutage patches a ConfigMap every 100 ms before, during and after outage: the
// reloader must end on the value the API holds at the end, never reload an older value after a
// newer one, and never exit.
func changesAcrossAnOutage(t *testing.T, outage func(), after func(p *testcluster.Process, ns string)) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := t.TempDir()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.yaml": "0"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	app := newFakeApp(t, filepath.Join(root, "app.yaml"))
	p := startReloader(t, nil, "--configmap="+ns+"/app", "--configroot="+root, "--reload-http="+app.url())
	p.WaitReady(t)

	tried, accepted := testcluster.ChangesAcross(t, client, 100*time.Millisecond, func(c context.Context, n int) error {
		_, err := client.CoreV1().ConfigMaps(ns).Patch(c, "app", types.MergePatchType, []byte(fmt.Sprintf(`{"data":{"app.yaml":"%d"}}`, n)), metav1.PatchOptions{})
		return err
	}, outage)

	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx(t), "app", metav1.GetOptions{})
	require.NoError(t, err)
	final := cm.Data["app.yaml"]
	require.Eventually(t, func() bool {
		r := app.reloads()
		return len(r) > 0 && r[len(r)-1] == final
	}, eventually, tick, "the last reload must be of the value the API holds (%s)", final)
	assert.Equal(t, final, readFile(root, "app.yaml"))
	reloads := app.reloads()
	for i := 1; i < len(reloads); i++ {
		prev, _ := strconv.Atoi(reloads[i-1])
		cur, _ := strconv.Atoi(reloads[i])
		assert.Greater(t, cur, prev, "reload %d went back from %s to %s", i, reloads[i-1], reloads[i])
	}
	t.Logf("%d changes tried, %d accepted by the API, %d reloads, final %s", tried, accepted, len(reloads), final)
	assert.False(t, p.Exited(), "the reloader never exits for an outage")
	if after != nil {
		after(p, ns)
	}
}

// No Secret value in any log line at --v=10 and --vmodule=*=10, any Event, any metric, /status
// or error: from the API, a Secret with a recognisable value through unpack, reload, rejection
// and recovery; from mounted folders, the same through prometheus-config-reloader's rendered
// config (the value in the file and in an environment variable it refers to); and a malformed
// runtime-info URL's password when it stops the start.
func TestNoSecretValueInAnyOutput(t *testing.T) {
	const canary = "CONFIGWAVE-CANARY-5c1f09"
	noCanary := func(t *testing.T, outputs map[string]string) {
		t.Helper()
		for name, text := range outputs {
			assert.NotContains(t, text, canary, "secret value in the %s", name)
			assert.NotContains(t, text, base64.StdEncoding.EncodeToString([]byte(canary + "-v1"))[:20], "base64 secret value in the %s", name)
		}
	}
	t.Run("API", func(t *testing.T) {
		client := adminClient(t)
		ns := testcluster.Namespace(t, client)
		_, err := client.CoreV1().Secrets(ns).Create(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
			StringData: map[string]string{"token": canary + "-v1"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		root := t.TempDir()
		app := newFakeApp(t, filepath.Join(root, "token"))
		p := startReloader(t, []string{"POD_NAME=app-0", "POD_NAMESPACE=" + ns}, "--v=10", "--vmodule=*=10", "--secret=creds", "--configroot="+root,
			"--reload-http="+app.url(), `--validate-command=cat "$CONFIG_DIR/token"; grep -qv rejected "$CONFIG_DIR/token"`)
		p.WaitReady(t)
		for _, v := range []string{"-v2", "-rejected", "-v3"} {
			_, err = client.CoreV1().Secrets(ns).Patch(ctx(t), "creds", types.MergePatchType, fmt.Appendf(nil, `{"stringData":{"token":%q}}`, canary+v), metav1.PatchOptions{})
			require.NoError(t, err)
			time.Sleep(500 * time.Millisecond)
		}
		require.Eventually(t, func() bool { return readFile(root, "token") == canary+"-v3" }, eventually, tick)
		require.Eventually(t, func() bool { return len(events(t, client, ns, "ConfigRejected")) > 0 }, eventually, tick)

		_, metrics := p.Get("/metrics")
		code, status := p.Get("/status")
		require.Equal(t, 200, code, status)
		var evText strings.Builder
		evs, err := client.CoreV1().Events(ns).List(ctx(t), metav1.ListOptions{})
		require.NoError(t, err)
		for _, e := range evs.Items {
			evText.WriteString(e.Message + "\n")
		}
		noCanary(t, map[string]string{"log": p.Log(), "metrics": metrics, "status page": status, "events": evText.String()})
		assert.Contains(t, p.Log(), "log verbosity capped")
	})
	t.Run("folders and the rendered config", func(t *testing.T) {
		cfgDir, rules, outDir := t.TempDir(), t.TempDir(), t.TempDir()
		config, rule := testvolume.New(cfgDir), testvolume.New(rules)
		write := func(v string) {
			require.NoError(t, config.Write(map[string]string{"prometheus.yaml": "password: $(CANARY_PASSWORD)\ntoken: " + canary + v + "\n"}))
			require.NoError(t, rule.Write(map[string]string{"token": canary + v}))
		}
		write("-v1")
		out := filepath.Join(outDir, "prometheus.env.yaml")
		app := newFakeApp(t, out)
		p := startFolderReloaderAt(t, []string{"CANARY_PASSWORD=" + canary + "-env"}, "--listen-address", "--v=10", "--vmodule=*=10",
			"--config-file="+filepath.Join(cfgDir, "prometheus.yaml"), "--config-envsubst-file="+out, "--watched-dir="+rules,
			"--reload-url="+app.url(), `--validate-command=cat "$CONFIG_DIR/prometheus.env.yaml"; ! grep -q rejected "$CONFIG_DIR/prometheus.env.yaml"`)
		for _, v := range []string{"-v2", "-rejected", "-v3"} {
			write(v)
			time.Sleep(500 * time.Millisecond)
		}
		require.Eventually(t, func() bool {
			r := app.reloads()
			return len(r) > 0 && strings.Contains(r[len(r)-1], canary+"-v3") && strings.Contains(r[len(r)-1], canary+"-env")
		}, eventually, tick, "the rendered config of the last set was told: %s", p.Log())
		assert.Contains(t, p.Log(), "rejected", "the rejected set was seen")
		_, metrics := p.Get("/metrics")
		_, status := p.Get("/status")
		noCanary(t, map[string]string{"log": p.Log(), "metrics": metrics, "status page": status})
	})
	t.Run("a malformed runtime-info URL", func(t *testing.T) {
		if reloaderBin == "" {
			t.Skip("needs the reloader binary; skipped in -short mode")
		}
		p := testcluster.StartProcess(t, reloaderBin, noAPI, "--watched-dir="+t.TempDir(), "--reload-method=signal",
			"--runtimeinfo-url=http://admin:"+canary+"-v1@[::1/api/v1/status/runtimeinfo")
		assert.NotZero(t, p.Wait(t, 30*time.Second), "the start stops")
		assert.Contains(t, p.Log(), "--runtimeinfo-url")
		noCanary(t, map[string]string{"log": p.Log()})
	})
}

func events(t *testing.T, client kubernetes.Interface, ns, reason string) []corev1.Event {
	t.Helper()
	list, err := client.CoreV1().Events(ns).List(ctx(t), metav1.ListOptions{})
	require.NoError(t, err)
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// An app that ignores SIGHUP keeps running; one that ignores SIGTERM is killed after
// --shutdown-grace, and the reloader exits 137 like a killed process.
func TestSubprocessAppIgnoringSignals(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := t.TempDir()
	out := filepath.Join(t.TempDir(), "app.out")
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.conf": "v1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	self, err := os.Executable()
	require.NoError(t, err)
	env := []string{"CONFIGWAVE_TEST_APP=trap", "IGNORE_SIGNALS=1", "APP_OUT=" + out, "CONFIG_FILE=" + filepath.Join(root, "app.conf")}
	p := startReloader(t, env, "--configmap="+ns+"/app", "--configroot="+root, "--shutdown-grace=1s", "--", self)
	p.WaitReady(t)
	require.Eventually(t, func() bool { b, _ := os.ReadFile(out); return strings.HasPrefix(string(b), "start:") }, eventually, tick)

	patchData(t, client, ns, "app", `{"data":{"app.conf":"v2"}}`)
	require.Eventually(t, func() bool { return readFile(root, "app.conf") == "v2" }, eventually, tick)
	time.Sleep(300 * time.Millisecond)
	assert.False(t, p.Exited(), "an app that ignores SIGHUP keeps running")

	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 137, p.Wait(t, 20*time.Second), "killed after the grace period")
	assert.Contains(t, p.Log(), "did not exit within --shutdown-grace")
}

// etcd stopped for 3 s and started again while changes keep coming.
func TestZZEtcdRestart(t *testing.T) {
	changesAcrossAnOutage(t, func() {
		cluster.StopEtcd()
		time.Sleep(3 * time.Second)
		require.NoError(t, cluster.StartEtcd(ctx(t)))
	}, nil)
}

// A ConfigMap near the 1 MiB object limit, with many keys and binary data: byte-exact.
func TestHugeConfigMapWithManyKeys(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	data := map[string]string{}
	binary := map[string][]byte{}
	for i := range 900 {
		data[fmt.Sprintf("key-%03d.conf", i)] = strings.Repeat(string(rune('a'+i%26)), 1000)
	}
	blob := make([]byte, 50_000)
	for i := range blob {
		blob[i] = byte(i * 7)
	}
	binary["blob.bin"] = blob
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "big", data, binary), metav1.CreateOptions{})
	require.NoError(t, err)
	root := t.TempDir()
	app := newFakeApp(t, filepath.Join(root, "key-000.conf"))
	p := startReloader(t, nil, "--configmap="+ns+"/big", "--configroot="+root, "--reload-http="+app.url())
	p.WaitReady(t)
	for k, v := range data {
		require.Equal(t, v, readFile(root, k), k)
	}
	assert.Equal(t, string(blob), readFile(root, "blob.bin"))

	patchData(t, client, ns, "big", `{"data":{"key-000.conf":"changed"}}`)
	require.Eventually(t, func() bool { return len(app.reloads()) == 1 }, eventually, tick)
	assert.Equal(t, "changed", app.reloads()[0])
	assert.Equal(t, data["key-899.conf"], readFile(root, "key-899.conf"))
}

// Watch expiry: etcd compacts every second; while the API server is down the reloader's last
// resourceVersion is compacted away, so its watch comes back with 410 Gone and must relist.
// A change made afterwards still arrives.
func TestWatchExpiryRelists(t *testing.T) {
	testcluster.Need(t, cluster)
	c := testcluster.ForTestWith(t, testcluster.Options{EtcdArgs: []string{"--auto-compaction-mode=periodic", "--auto-compaction-retention=1s"}})
	client, err := kubernetes.NewForConfig(c.Config())
	require.NoError(t, err)
	ns := testcluster.Namespace(t, client)
	for _, name := range []string{"app", "noise"} {
		_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, name, map[string]string{"app.yaml": "v1"}, nil), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	root := t.TempDir()
	app := newFakeApp(t, filepath.Join(root, "app.yaml"))
	p := startReloader(t, nil, "--kubeconfig="+c.Kubeconfig(), "--v=5", "--configmap="+ns+"/app", "--configroot="+root, "--reload-http="+app.url())
	p.WaitReady(t)

	for i := range 30 { // revisions the reloader never sees, then compacted away
		patchData(t, client, ns, "noise", fmt.Sprintf(`{"data":{"app.yaml":"n%d"}}`, i))
	}
	time.Sleep(2 * time.Second)
	c.StopAPIServer()
	require.NoError(t, c.StartAPIServer(ctx(t)))

	require.Eventually(t, func() bool {
		_, err := client.CoreV1().ConfigMaps(ns).Patch(ctx(t), "app", types.MergePatchType, []byte(`{"data":{"app.yaml":"after-expiry"}}`), metav1.PatchOptions{})
		return err == nil
	}, eventually, 100*time.Millisecond)
	require.Eventually(t, func() bool { return len(app.reloads()) == 1 }, eventually, tick)
	assert.Equal(t, "after-expiry", app.reloads()[0])
	assert.GreaterOrEqual(t, p.Metric(`configwave_reloader_watch_restarts_total{source="configmap `+ns+`/app"}`), float64(2))
	assert.Contains(t, p.Log(), "too old resource version", "the watch must have come back with 410 Gone")
}

// --selector across all namespaces and both kinds: ConfigMaps and Secrets from two namespaces
// land in one folder each (Secret files 0600); a labelled object elsewhere appears and goes.
func TestSelectorAllNamespacesBothKinds(t *testing.T) {
	client := adminClient(t)
	a, b := testcluster.Namespace(t, client), testcluster.Namespace(t, client)
	label := "cw-" + a // unique, so objects of other tests never match
	labels := map[string]string{label: "1"}
	_, err := client.CoreV1().ConfigMaps(a).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dash-a", Labels: labels},
		Data: map[string]string{"a.json": "{}"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.CoreV1().Secrets(b).Create(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds-b", Labels: labels},
		StringData: map[string]string{"token": "t"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	root := t.TempDir()
	p := startReloader(t, nil, "--selector="+label+"=1", "--all-namespaces", "--selector-kind=both", "--layout=per-object", "--configroot="+root)
	p.WaitReady(t)
	assert.Equal(t, "{}", readFile(root, "dash-a/a.json"))
	assert.Equal(t, "t", readFile(root, "creds-b/token"))
	info, err := os.Stat(filepath.Join(root, "creds-b", "token"))
	require.NoError(t, err)
	assert.EqualValues(t, 0o600, info.Mode().Perm())

	require.NoError(t, client.CoreV1().Secrets(b).Delete(ctx(t), "creds-b", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(root, "creds-b")); return os.IsNotExist(err) }, eventually, tick)
	assert.Equal(t, "{}", readFile(root, "dash-a/a.json"))
}

// What a Grafana chart's sidecar (k8s-sidecar) user sets up: dashboards labelled in a list of
// namespaces, the same name in two of them, each put in the folder its
// k8s-sidecar-target-directory annotation names (relative, or absolute under the root), with
// unique file names. A labelled object in a namespace not listed is not read; one whose folder
// is outside the root is left out; a change lands.
func TestSelectorNamespaceListFolderAnnotationUniqueFilenames(t *testing.T) {
	client := adminClient(t)
	a, b, other := testcluster.Namespace(t, client), testcluster.Namespace(t, client), testcluster.Namespace(t, client)
	label := "cw-" + a
	root := t.TempDir()
	create := func(ns, name, folder, body string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{label: "1"}}, Data: map[string]string{"overview.json": body}}
		if folder != "" {
			cm.Annotations = map[string]string{"k8s-sidecar-target-directory": folder}
		}
		_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), cm, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	create(a, "overview", "Team A", `{"a":1}`)
	create(b, "overview", filepath.Join(root, "Team B"), `{"b":1}`)
	create(b, "plain", "", `{"plain":1}`)
	create(b, "escapes", "/etc", `{"x":1}`)
	create(other, "overview", "", `{"other":1}`)
	p := startReloader(t, nil, "--selector="+label+"=1", "--namespace="+a+","+b, "--unique-filenames", "--configroot="+root)
	p.WaitReady(t)
	assert.Equal(t, `{"a":1}`, readFile(root, "Team A/namespace_"+a+".configmap_overview.overview.json"))
	assert.Equal(t, `{"b":1}`, readFile(root, "Team B/namespace_"+b+".configmap_overview.overview.json"))
	assert.Equal(t, `{"plain":1}`, readFile(root, "namespace_"+b+".configmap_plain.overview.json"))
	assert.NoFileExists(t, filepath.Join(root, "namespace_"+other+".configmap_overview.overview.json"), "a namespace not listed is not read")
	require.Eventually(t, func() bool {
		return strings.Contains(p.Log(), fmt.Sprintf(`configmap %s/escapes annotation k8s-sidecar-target-directory=\"/etc\" is outside the config root`, b))
	}, eventually, tick)
	assert.Equal(t, 1.0, p.Metric("configwave_reloader_objects_left_out"))

	_, err := client.CoreV1().ConfigMaps(a).Patch(ctx(t), "overview", types.MergePatchType, []byte(`{"data":{"overview.json":"{\"a\":2}"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return readFile(root, "Team A/namespace_"+a+".configmap_overview.overview.json") == `{"a":2}`
	}, eventually, tick)
}

// Grafana's reload API as k8s-sidecar calls it: a JSON body (REQ_PAYLOAD) and basic auth from
// mounted files; the password never reaches the log.
func TestReloadRequestBodyAndBasicAuthFiles(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "dash", map[string]string{"d.json": "{}"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	grafana := newReloadEndpoint(t)
	secrets := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(secrets, "user"), []byte("admin\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(secrets, "password"), []byte("gr4fana-pw\n"), 0o600))
	root := t.TempDir()
	p := startReloader(t, nil, "--namespace="+ns, "--configmap=dash", "--configroot="+root,
		"--reload-http="+grafana.URL+"/api/admin/provisioning/dashboards/reload", "--reload-http-body={}",
		"--reload-http-username-file="+filepath.Join(secrets, "user"), "--reload-http-password-file="+filepath.Join(secrets, "password"))
	p.WaitReady(t)
	_, err = client.CoreV1().ConfigMaps(ns).Patch(ctx(t), "dash", types.MergePatchType, []byte(`{"data":{"d.json":"{\"v\":2}"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, reloadRequest{"POST /api/admin/provisioning/dashboards/reload", "{}", "application/json", "admin", "gr4fana-pw"}, grafana.next(t, p))
	assert.NotContains(t, p.Log(), "gr4fana-pw")
}

// The Grafana chart's dashboard sidecar with our image: no arguments, k8s-sidecar's
// environment as the chart renders it, through the image's entrypoint (wave, which hands over
// to the reloader beside it) and through the reloader itself. The dashboards land in FOLDER,
// Grafana's reload API gets its first POST with basic auth once they are there (REQ_SKIP_INIT
// unset), and one per change; the password from REQ_PASSWORD never reaches the log.
func TestK8sSidecarEnvironment(t *testing.T) {
	client := adminClient(t)
	wave, remove, err := testcluster.BuildCommand("../wave", "wave")
	require.NoError(t, err)
	t.Cleanup(remove)
	b, err := os.ReadFile(reloaderBin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(wave), "reloader"), b, 0o755), "the image holds both binaries in one folder")
	for name, bin := range map[string]string{"the image's entrypoint, wave": wave, "the reloader": reloaderBin} {
		t.Run(name, func(t *testing.T) { k8sSidecarEnvironment(t, client, bin) })
	}
}

func k8sSidecarEnvironment(t *testing.T, client kubernetes.Interface, bin string) {
	ns := testcluster.Namespace(t, client)
	cm := configMap(ns, "node-exporter", map[string]string{"node.json": `{"title":"Nodes"}`}, nil)
	cm.Labels = map[string]string{"grafana_dashboard": ns} // a value of its own: other tests' objects never match
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), cm, metav1.CreateOptions{})
	require.NoError(t, err)
	grafana := newReloadEndpoint(t)
	folder := t.TempDir()
	addr := testcluster.FreeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	p := testcluster.StartProcess(t, bin, []string{"KUBECONFIG=" + cluster.Kubeconfig(), "HEALTH_HOST=127.0.0.1", "HEALTH_PORT=" + port,
		"METHOD=WATCH", "LABEL=grafana_dashboard", "LABEL_VALUE=" + ns, "FOLDER=" + folder, "RESOURCE=both", "NAMESPACE=" + ns,
		"REQ_USERNAME=admin", "REQ_PASSWORD=pr0m-gr4fana", "REQ_URL=" + grafana.URL + "/api/admin/provisioning/dashboards/reload", "REQ_METHOD=POST"})
	p.Addr = addr
	p.WaitReady(t)
	assert.Equal(t, `{"title":"Nodes"}`, readFile(folder, "node.json"))
	want := reloadRequest{"POST /api/admin/provisioning/dashboards/reload", "", "", "admin", "pr0m-gr4fana"}
	assert.Equal(t, want, grafana.next(t, p), "the first request, once the dashboards are there")

	_, err = client.CoreV1().ConfigMaps(ns).Patch(ctx(t), "node-exporter", types.MergePatchType, []byte(`{"data":{"node.json":"{\"title\":\"Nodes v2\"}"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, want, grafana.next(t, p))
	assert.Equal(t, `{"title":"Nodes v2"}`, readFile(folder, "node.json"))
	assert.Contains(t, p.Log(), "started with k8s-sidecar's environment")
	assert.Contains(t, p.Log(), `"msg":`, "JSON logs, k8s-sidecar's default LOG_FORMAT")
	assert.NotContains(t, p.Log(), "pr0m-gr4fana")
}

// The connection to the API server goes silent, neither closed nor reset (a dropped route; the
// watches of k8s-sidecar's users went silent so while its /healthz stayed green): the dead
// connection is found, the watch opened again on a new one and counted, and a change made
// meanwhile lands. Over HTTP/2 client-go's health check finds it (shortened here from its
// 30 s + 15 s); over HTTP/1.1, which has none, --watch-idle-timeout does (shortened from 3m).
func TestSilentConnectionIsFoundAndTheChangeLands(t *testing.T) {
	for name, setup := range map[string]struct {
		env  []string
		args []string
	}{
		"HTTP/2 health check":               {env: []string{"HTTP2_READ_IDLE_TIMEOUT_SECONDS=1", "HTTP2_PING_TIMEOUT_SECONDS=1"}},
		"HTTP/1.1 and --watch-idle-timeout": {env: []string{"DISABLE_HTTP2=1"}, args: []string{"--watch-idle-timeout=2s"}},
	} {
		t.Run(name, func(t *testing.T) { silentConnection(t, setup.env, setup.args) })
	}
}

func silentConnection(t *testing.T, env, args []string) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.yaml": "v1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	proxy := testcluster.StartProxy(t, cluster.APIAddr())
	kubeconfig, err := cluster.KubeconfigVia(t.TempDir(), proxy.Addr)
	require.NoError(t, err)
	root := t.TempDir()
	app := newFakeApp(t, filepath.Join(root, "app.yaml"))
	p := startReloader(t, env, append([]string{"--kubeconfig=" + kubeconfig, "--namespace=" + ns, "--configmap=app", "--configroot=" + root,
		"--reload-http=" + app.url()}, args...)...)
	p.WaitReady(t)
	restarts := p.Metric(`configwave_reloader_watch_restarts_total{source="configmap ` + ns + `/app"}`)

	proxy.Blackhole()
	_, err = client.CoreV1().ConfigMaps(ns).Patch(ctx(t), "app", types.MergePatchType, []byte(`{"data":{"app.yaml":"v2"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return readFile(root, "app.yaml") == "v2" }, eventually, tick, "the change lands: %s", p.Log())
	require.Eventually(t, func() bool { r := app.reloads(); return len(r) > 0 && r[len(r)-1] == "v2" }, eventually, tick, "and the app is told")
	assert.Greater(t, p.Metric(`configwave_reloader_watch_restarts_total{source="configmap `+ns+`/app"}`), restarts, "the watch opened again is counted")
}

// applyReloaderRBAC creates config/reloader-rbac's ServiceAccount, Role (resourceNames:
// app-config) and RoleBinding in ns, as kubectl apply -k would.
func applyReloaderRBAC(t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	applyRBAC(t, client, ns, "reloader-rbac", "serviceaccount.yaml", "role.yaml", "rolebinding.yaml")
}

// applyRBAC creates the ServiceAccounts, Roles and RoleBindings of the files of config/dir in
// ns, with the namespace kustomize would give the bindings' subjects.
func applyRBAC(t *testing.T, client kubernetes.Interface, ns, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("..", "..", "config", dir, f))
		require.NoError(t, err)
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
		require.NoError(t, err)
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = client.CoreV1().ServiceAccounts(ns).Create(ctx(t), o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = client.RbacV1().Roles(ns).Create(ctx(t), o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			for i := range o.Subjects {
				o.Subjects[i].Namespace = ns
			}
			_, err = client.RbacV1().RoleBindings(ns).Create(ctx(t), o, metav1.CreateOptions{})
		default:
			t.Fatalf("config/%s/%s holds a %T", dir, f, obj)
		}
		require.NoError(t, err, f)
	}
}
