package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/configwave/configwave/internal/build/gobuild"
	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testvolume"
)

// What makes a launch read the API, as the peers' command lines give it: the file-only build
// refuses exactly these.
func TestNeedsAPI(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		argv0 string
		args  []string
		want  string // "" when the launch reads folders only
	}{
		{"configmap-reload", []string{"--volume-dir=" + dir, "--webhook-url=http://127.0.0.1:9090/-/reload"}, ""},
		{"prometheus-config-reloader", []string{"--watched-dir=" + dir, "--reload-url=http://127.0.0.1:9090/-/reload"}, ""},
		{"reloader", []string{"--volume-dir=" + dir, "--reload-http=http://127.0.0.1:9090/-/reload"}, ""},
		{"reloader", []string{"--volume-dir=" + dir, "--kubeconfig=/k", "--reload-http=http://127.0.0.1:9090/-/reload"}, "--kubeconfig"},
		{"reloader", []string{"--configmap=web", "--reload-http=http://127.0.0.1:9090/-/reload"}, "--configmap"},
		{"reloader", []string{"--secret=tls", "--reload-http=http://127.0.0.1:9090/-/reload"}, "--secret"},
		{"reloader", []string{"--selector=a=b", "--reload-http=http://127.0.0.1:9090/-/reload"}, "--selector"},
		{"reloader", []string{"--configmap=web", "--namespace=a", "--reload-http=http://127.0.0.1:9090/-/reload"}, "--configmap"},
		// One pod first with a folder: not an API launch, so that the check says why it cannot
		// work on a folder, in either build.
		{"reloader", []string{"--volume-dir=" + dir, "--rollout=one-first", "--reload-http=http://127.0.0.1:9090/-/reload"}, ""},
		{"reloader", []string{"--configmap=web", "--rollout=one-first", "--reload-http=http://127.0.0.1:9090/-/reload"}, "--configmap"},
	} {
		t.Run(strings.Join(append([]string{tc.argv0}, tc.args...), " "), func(t *testing.T) {
			cl := newCommandLine()
			require.NoError(t, cl.fs.Parse(cl.args(tc.args)))
			o, err := cl.translate(tc.argv0, nil)
			require.NoError(t, err)
			what, needs := o.needsAPI()
			assert.Equal(t, tc.want != "", needs)
			assert.Equal(t, tc.want, what)
		})
	}
}

// The file-only build, built as the image builds it, beside the full build (what it links is
// repocheck's TestLayering's business): it stops an API launch with one line that names the full build, and takes over a folder
// launch started at the full build (the image's entrypoint, where a chart gives args only).
func TestFileOnlyBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the reloader")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	image := t.TempDir()
	for _, name := range []string{"reloader", gobuild.FileOnlyReloader} {
		require.NoError(t, gobuild.Binary(ctx(t), gobuild.Target{Root: root, OS: "linux", Arch: runtime.GOARCH, Version: "test"}, name, filepath.Join(image, name)))
	}
	bin := filepath.Join(image, gobuild.FileOnlyReloader)

	cmd := exec.Command(bin, "--configmap=web", "--reload-http=http://127.0.0.1:9/-/reload")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "want an exit status, got %v", err)
	assert.Equal(t, 2, exit.ExitCode())
	assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())
	assert.Contains(t, stderr.String(), "--configmap needs the Kubernetes API")
	assert.Contains(t, stderr.String(), "run "+fullBuildPath)

	// configmap-reload's launch at the image's entrypoint: the file-only build runs it, and a
	// swap of the folder is told to the app.
	dir := t.TempDir()
	vol := testvolume.New(dir)
	require.NoError(t, vol.Write(map[string]string{"app.conf": "v1"}))
	var told atomic.Int32
	app := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { told.Add(1) }))
	defer app.Close()
	addr := testcluster.FreeAddr(t)
	p := testcluster.StartProcess(t, filepath.Join(image, "reloader"), noAPI, "--web.listen-address="+addr, "--volume-dir="+dir, "--webhook-url="+app.URL)
	p.Addr = addr
	p.WaitReady(t)
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.Cmd.Process.Pid))
	require.NoError(t, err)
	assert.Equal(t, bin, exe, "the process runs the file-only build")
	require.NoError(t, vol.Write(map[string]string{"app.conf": "v2"}))
	require.Eventually(t, func() bool { return told.Load() == 1 }, 10*time.Second, 20*time.Millisecond, "the app was never told of the swap")

	// The Prometheus Operator's launch at the image's /bin/prometheus-config-reloader (the
	// file-only build) with the empty web config file it passes when its Prometheus sets no TLS
	// or auth: plain HTTP from the file-only build; once the file configures basic auth, the
	// full build serves the endpoints with it.
	hash, err := bcrypt.GenerateFromPassword([]byte("right"), bcrypt.MinCost)
	require.NoError(t, err)
	web := filepath.Join(t.TempDir(), "web.yml")
	require.NoError(t, os.WriteFile(web, nil, 0o600))
	link := filepath.Join(image, "prometheus-config-reloader")
	require.NoError(t, os.Symlink(gobuild.FileOnlyReloader, link))
	addr = testcluster.FreeAddr(t)
	promArgs := []string{"--listen-address=" + addr, "--watched-dir=" + dir, "--reload-url=" + app.URL, "--web-config-file=" + web}
	p = testcluster.StartProcess(t, link, noAPI, promArgs...)
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond, "an empty web config: plain HTTP")
	exe, err = os.Readlink(fmt.Sprintf("/proc/%d/exe", p.Cmd.Process.Pid))
	require.NoError(t, err)
	assert.Equal(t, bin, exe, "the file-only build serves an empty web config")
	require.NoError(t, os.WriteFile(web, []byte("basic_auth_users:\n  prom: "+string(hash)+"\n"), 0o600))
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusUnauthorized
	}, 10*time.Second, 20*time.Millisecond, "the endpoints are served with the web config's basic auth")
	exe, err = os.Readlink(fmt.Sprintf("/proc/%d/exe", p.Cmd.Process.Pid))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(image, "reloader"), exe, "the full build serves the web config once it configures basic auth")

	// Without the full build beside it, the file-only build stops at a configured web config:
	// never the endpoints in the clear.
	alone := t.TempDir()
	require.NoError(t, os.Link(bin, filepath.Join(alone, gobuild.FileOnlyReloader)))
	cmd = exec.Command(filepath.Join(alone, gobuild.FileOnlyReloader), promArgs...)
	stderr.Reset()
	cmd.Stderr = &stderr
	err = cmd.Run()
	require.True(t, errors.As(err, &exit), "want an exit status, got %v", err)
	assert.Equal(t, 2, exit.ExitCode())
	assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())
	assert.Contains(t, stderr.String(), "--web-config-file needs the full build")
	assert.Contains(t, stderr.String(), "run "+fullBuildPath)
}
