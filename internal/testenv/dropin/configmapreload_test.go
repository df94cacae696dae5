package dropin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/testenv/testpod"
	"github.com/configwave/configwave/internal/testenv/testvolume"
)

// fluent-bit's chart runs configmap-reload with arguments only, in Go's one-dash syntax, from
// the image's entrypoint, as user 65532 on a read-only root with every capability dropped. With
// the image swapped for ours, a change of either mounted ConfigMap reaches fluent-bit's reload
// endpoint, and configmap-reload's metrics answer on its port.
func TestFluentBitChartConfigmapReload(t *testing.T) {
	testpod.Need(t)
	objs, err := Load("testdata/fluent-bit-chart.yaml")
	require.NoError(t, err)
	spec, err := PodSpec(objs, "DaemonSet", "fluent-bit")
	require.NoError(t, err)
	img := testpod.Unpack(t, testpod.Layout(t), "reloader")

	pod := testpod.New(t, "fluent-bit-x7k2p", "default", spec)
	config, scripts := testvolume.New(t.TempDir()), testvolume.New(t.TempDir())
	require.NoError(t, config.Write(map[string]string{"fluent-bit.conf": "[SERVICE]\n    Flush 1\n"}))
	require.NoError(t, scripts.Write(map[string]string{"filter.lua": "-- v1\n"}))
	pod.Volume("config", config.Dir)
	pod.Volume("luascripts", scripts.Dir)
	app := newRecordingApp(t, pod, "127.0.0.1:2020") // fluent-bit's HTTP server
	c := pod.Run(t, img, "reloader")

	require.Eventually(t, func() bool { code, _ := pod.Netns.Get("127.0.0.1:9533", "/metrics"); return code == 200 }, eventually, 50*time.Millisecond,
		"configmap-reload's metrics port; log:\n%s", c.Log())
	app.quiet(t, time.Second) // configmap-reload tells nothing at start
	assert.Equal(t, "reloader-fileonly", filepath.Base(containerExe(t, c)),
		"the image's entrypoint, the full build, hands a folder launch over to the file-only build")

	require.NoError(t, config.Write(map[string]string{"fluent-bit.conf": "[SERVICE]\n    Flush 2\n"}))
	r := app.next(t, c)
	assert.Equal(t, "POST", r.Method)
	assert.Equal(t, "/api/v2/reload", r.Path)
	require.NoError(t, scripts.Write(map[string]string{"filter.lua": "-- v2\n"}))
	r = app.next(t, c)
	assert.Equal(t, "/api/v2/reload", r.Path)

	// The app has the request before the reloader has its answer, and counts it.
	want := `configmap_reload_success_reloads_total{webhook="http://localhost:2020/api/v2/reload"} 2`
	var metrics string
	assert.Eventually(t, func() bool {
		_, metrics = pod.Netns.Get("127.0.0.1:9533", "/metrics")
		return strings.Contains(metrics, want)
	}, eventually, 20*time.Millisecond,
		"%s not in:\n%s", want, metrics)
	assert.False(t, c.Exited(), c.Log())
}

// containerExe is the program the container of runc process c runs: runc run waits for the
// container's process, its child.
func containerExe(t *testing.T, c *testcluster.Process) string {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", c.Cmd.Process.Pid))
	require.NoError(t, err)
	var fields []string // runc forks from whichever of its threads runs
	for _, task := range tasks {
		children, _ := os.ReadFile(task)
		fields = append(fields, strings.Fields(string(children))...)
	}
	require.NotEmpty(t, fields, "runc has no child")
	exe, err := os.Readlink("/proc/" + fields[0] + "/exe")
	require.NoError(t, err)
	return exe
}
