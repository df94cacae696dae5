package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testdisk"
)

// SIGTERM while a slow --validate-command runs: the command and its children are killed, the
// reaper collects them before it stops, and the reloader exits within --shutdown-grace with
// its documented code (0 in sidecar mode; the app's code in subprocess mode).
func TestShutdownDuringASlowValidation(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	for _, mode := range []string{"sidecar", "subprocess"} {
		t.Run(mode, func(t *testing.T) {
			client := adminClient(t)
			ns := testcluster.Namespace(t, client)
			root, marks := t.TempDir(), t.TempDir()
			_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.conf": "v1"}, nil), metav1.CreateOptions{})
			require.NoError(t, err)
			// The check passes v1 at once and hangs on anything else, leaving its pid behind.
			check := `grep -q v1 app.conf || { echo $$ > ` + marks + `/check.pid; sleep 600; }`
			args := []string{"--configmap=" + ns + "/app", "--configroot=" + root, "--shutdown-grace=3s", "--validate-command=" + check}
			var env []string
			want := 0
			if mode == "subprocess" {
				env = []string{"CONFIGWAVE_TEST_APP=trap", "APP_OUT=" + filepath.Join(marks, "app.out"), "CONFIG_FILE=" + filepath.Join(root, "app.conf"), "TERM_EXIT=7"}
				args = append(args, "--", self)
				want = 7
			}
			p := startReloader(t, env, args...)
			p.WaitReady(t)
			if mode == "subprocess" { // its handler in place, so SIGTERM gives its own code
				require.Eventually(t, func() bool { return strings.HasPrefix(readFile(marks, "app.out"), "start:") }, eventually, tick)
			}

			patchData(t, client, ns, "app", `{"data":{"app.conf":"v2"}}`)
			var pid int
			require.Eventually(t, func() bool {
				b, _ := os.ReadFile(filepath.Join(marks, "check.pid"))
				pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				return pid > 0
			}, eventually, tick, "the check started")
			start := time.Now()
			require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
			assert.Equal(t, want, p.Wait(t, 10*time.Second), "exits with its documented code, not hung on the check")
			t.Logf("%s: exited %s after SIGTERM", mode, time.Since(start).Round(time.Millisecond))
			_, err = os.Stat("/proc/" + strconv.Itoa(pid))
			assert.True(t, os.IsNotExist(err), "the check's shell was killed and reaped")
			assert.Equal(t, "v1", readFile(root, "app.conf"), "nothing half-applied")
		})
	}
}

// Under the restricted Pod Security profile only --configroot is writable: TMPDIR on a
// read-only folder must change nothing, --validate-command included.
func TestOnlyTheConfigRootIsWritable(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	tmp := testdisk.Tmpfs(t, "64k")
	testdisk.ReadOnly(t, tmp, true)
	root := t.TempDir()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), configMap(ns, "app", map[string]string{"app.conf": "good 1"}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	app := newFakeApp(t, filepath.Join(root, "app.conf"))
	p := startReloader(t, []string{"TMPDIR=" + tmp}, "--configmap="+ns+"/app", "--configroot="+root, "--reload-http="+app.url(),
		`--validate-command=grep -q '^good' app.conf || { echo "not good: $(cat app.conf)"; exit 1; }`)
	p.WaitReady(t)

	patchData(t, client, ns, "app", `{"data":{"app.conf":"broken"}}`)
	require.Eventually(t, func() bool { return status(t, p).LastResult == "validation_failed" }, eventually, tick)
	assert.Contains(t, status(t, p).LastError, "not good: broken", "the check ran and its output was kept without a temporary file")
	patchData(t, client, ns, "app", `{"data":{"app.conf":"good 2"}}`)
	require.Eventually(t, func() bool { return len(app.reloads()) == 1 }, eventually, tick)
	assert.Equal(t, "good 2", app.reloads()[0])
	assert.Equal(t, []string{}, nonNil(testdisk.Entries(t, tmp)), "nothing was written outside --configroot")
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
