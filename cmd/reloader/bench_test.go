package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// BenchmarkPatchToReload measures, per iteration, the time from a ConfigMap patch returning to
// the reload request arriving at the app, with the file already holding the new content. The
// floor is a bare client-go watch on the same ConfigMap in this process: the time the API
// server itself needs to tell anyone. Run with -benchtime=50x for 50 samples.
func BenchmarkPatchToReload(b *testing.B) {
	for _, debounce := range []string{"0s", "100ms"} {
		b.Run("debounce="+debounce, func(b *testing.B) { benchPatchToReload(b, debounce) })
	}
}

func benchPatchToReload(b *testing.B, debounce string) {
	client := adminClient(b)
	ns := testcluster.Namespace(b, client)
	root := b.TempDir()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(b), configMap(ns, "app", map[string]string{"n": "0"}, nil), metav1.CreateOptions{})
	require.NoError(b, err)
	app := newFakeApp(b, filepath.Join(root, "n"))
	p := startReloader(b, nil, "--configmap="+ns+"/app", "--configroot="+root, "--reload-http="+app.url(), "--debounce="+debounce, "--v=0")
	p.WaitReady(b)

	w, err := client.CoreV1().ConfigMaps(ns).Watch(ctx(b), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "app").String()})
	require.NoError(b, err)
	defer w.Stop()

	var reload, floor []time.Duration
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		want := strconv.Itoa(i)
		before := len(app.reloads())
		start := time.Now()
		patchData(b, client, ns, "app", fmt.Sprintf(`{"data":{"n":%q}}`, want))
		// Floor: the bare watch sees the change.
		for ev := range w.ResultChan() {
			if ev.Type == watch.Modified {
				if cm, ok := ev.Object.(interface{ GetResourceVersion() string }); ok && cm.GetResourceVersion() != "" {
					floor = append(floor, time.Since(start))
					break
				}
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for len(app.reloads()) == before {
			require.True(b, time.Now().Before(deadline), "no reload for patch %d", i)
			time.Sleep(200 * time.Microsecond)
		}
		app.mu.Lock()
		arrived, saw := app.at[len(app.at)-1], app.seen[len(app.seen)-1]
		app.mu.Unlock()
		require.Equal(b, want, saw, "the app must see the new file when told")
		reload = append(reload, arrived.Sub(start))
	}
	b.StopTimer()
	med, worst := stats(reload)
	fmed, _ := stats(floor)
	b.ReportMetric(ms(med), "median-ms")
	b.ReportMetric(ms(worst), "worst-ms")
	b.ReportMetric(ms(fmed), "floor-median-ms")
	b.ReportMetric(float64(med)/float64(fmed), "median/floor")
	b.ReportMetric(float64(rssKiB(b, p.Cmd.Process.Pid))/1024, "reloader-RSS-MiB")
}

func stats(d []time.Duration) (median, worst time.Duration) {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2], s[len(s)-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func rssKiB(b *testing.B, pid int) int {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(b, err)
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			require.NoError(b, err)
			return n
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
