package main

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// A set that went live is signalled whatever the next passes meet: the app refuses, then the
// next change is rejected by the check, then the app answers. It is told, once, of the live
// set, with no new change; the rejected one never reaches it.
func TestLiveSetIsToldAfterARejectedChange(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root := t.TempDir()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.conf": "good 1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	app := newFakeApp(t, filepath.Join(root, "app.conf"))
	var up atomic.Bool
	app.status = func(int) int {
		if up.Load() {
			return 200
		}
		return 503
	}
	p := startReloader(t, nil, "--configmap="+ns+"/app", "--configroot="+root, "--reload-http="+app.url(),
		"--reload-http-tries=1", "--reload-retry-interval=300ms", `--validate-command=grep -q '^good' app.conf`)
	p.WaitReady(t)

	patchData(t, client, ns, "app", `{"data":{"app.conf":"good 2"}}`)
	require.Eventually(t, func() bool { return status(t, p).NotifyPending }, eventually, tick)
	patchData(t, client, ns, "app", `{"data":{"app.conf":"broken"}}`)
	require.Eventually(t, func() bool { return status(t, p).LastResult == "validation_failed" }, eventually, tick)
	assert.True(t, status(t, p).NotifyPending, "still due after the rejected change")

	up.Store(true)
	require.Eventually(t, func() bool { return !status(t, p).NotifyPending }, eventually, tick, "told with no new change")
	seen := app.reloads()
	assert.Equal(t, "good 2", seen[len(seen)-1], "the app was told of the live set")
	assert.NotContains(t, seen, "broken")
	assert.Equal(t, "validation_failed", status(t, p).LastResult, "the newest config is still the rejected one")
}

// The reload request's credentials come from files (mounted Secrets), read on every request:
// a rotated token is used for the next reload without a restart.
func TestReloadCredentialsFromFiles(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	root, secrets := t.TempDir(), t.TempDir()
	token, apiKey := filepath.Join(secrets, "token"), filepath.Join(secrets, "api-key")
	require.NoError(t, os.WriteFile(token, []byte("tok-1\n"), 0o600))
	require.NoError(t, os.WriteFile(apiKey, []byte("key-1"), 0o600))
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.conf": "v1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	app := newFakeApp(t, filepath.Join(root, "app.conf"))
	p := startReloader(t, nil, "--configmap="+ns+"/app", "--configroot="+root, "--reload-http="+app.url(),
		"--reload-http-bearer-token-file="+token, "--reload-http-header=X-Api-Key: @"+apiKey)
	p.WaitReady(t)

	header := func() (string, string) {
		app.mu.Lock()
		defer app.mu.Unlock()
		return app.header.Get("Authorization"), app.header.Get("X-Api-Key")
	}
	patchData(t, client, ns, "app", `{"data":{"app.conf":"v2"}}`)
	require.Eventually(t, func() bool { return len(app.reloads()) == 1 }, eventually, tick)
	auth, key := header()
	assert.Equal(t, "Bearer tok-1", auth)
	assert.Equal(t, "key-1", key)

	require.NoError(t, os.WriteFile(token, []byte("tok-2\n"), 0o600)) // the Secret was rotated
	patchData(t, client, ns, "app", `{"data":{"app.conf":"v3"}}`)
	require.Eventually(t, func() bool { return len(app.reloads()) == 2 }, eventually, tick)
	auth, _ = header()
	assert.Equal(t, "Bearer tok-2", auth)
	assert.NotContains(t, p.Log(), "tok-", "a token never reaches the log")
}
