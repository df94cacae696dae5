package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// BenchmarkChangeToAnnotation measures, per iteration, the time from a ConfigMap patch
// returning to the watched Deployment's template annotation changing, while the given number
// of opted-in Deployments (each with its own ConfigMap, 0 replicas) are managed. The floor is
// a bare watch on the ConfigMap in this process. Run with -benchtime=50x.
func BenchmarkChangeToAnnotation(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("deployments=%d", n), func(b *testing.B) { benchChangeToAnnotation(b, n) })
	}
}

func benchChangeToAnnotation(b *testing.B, n int) {
	client := adminClient(b)
	ns := testcluster.Namespace(b, client)
	parallel(b, n, func(i int) {
		name := fmt.Sprintf("app-%d", i)
		createCM(b, client, ns, name, map[string]string{"a": "0"})
		d := deployment(ns, name, withEnvKey(name, "a"))
		d.Spec.Replicas = new(int32)
		createDeployment(b, client, d)
	})
	p := startWave(b, ns, "--flapping-threshold=0") // b.N changes of one ConfigMap: a machine's rate, which the brake would hold
	require.Eventually(b, func() bool {
		return p.Metric(`configwave_wave_patches_total{kind="Deployment",type="baseline"}`) == float64(n)
	}, 5*time.Minute, 100*time.Millisecond, "wave did not record all %d workloads", n)

	cmWatch, err := client.CoreV1().ConfigMaps(ns).Watch(ctx(b), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "app-0").String()})
	require.NoError(b, err)
	defer cmWatch.Stop()
	dWatch, err := client.AppsV1().Deployments(ns).Watch(ctx(b), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "app-0").String()})
	require.NoError(b, err)
	defer dWatch.Stop()
	last := ""

	var lat, floor []time.Duration
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		start := time.Now()
		patchCM(b, client, ns, "app-0", fmt.Sprintf(`{"data":{"a":"%d"}}`, i))
		waitEvent(b, cmWatch, func(watch.Event) bool { return true })
		floor = append(floor, time.Since(start))
		waitEvent(b, dWatch, func(ev watch.Event) bool {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok {
				return false
			}
			h := d.Spec.Template.Annotations[rollout.InputsHashAnnotation]
			if h != "" && h != last {
				last = h
				return true
			}
			return false
		})
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	med, worst := stats(lat)
	fmed, _ := stats(floor)
	b.ReportMetric(ms(med), "median-ms")
	b.ReportMetric(ms(worst), "worst-ms")
	b.ReportMetric(ms(fmed), "floor-median-ms")
	b.ReportMetric(float64(med)/float64(fmed), "median/floor")
	rss, _ := memKiB(b, p.Cmd.Process.Pid)
	b.ReportMetric(float64(rss)/1024, "wave-RSS-MiB")
}

func waitEvent(b *testing.B, w watch.Interface, match func(watch.Event) bool) {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(b, ok, "watch closed")
			if match(ev) {
				return
			}
		case <-timeout:
			b.Fatal("no matching event within 30s")
		}
	}
}

// BenchmarkMemoryWithConfigMaps measures wave's RSS after its first full sync with no
// ConfigMaps (the floor) and with 5,000 ConfigMaps of 16 KiB (80 MiB of config) in the
// namespaces it watches.
func BenchmarkMemoryWithConfigMaps(b *testing.B) {
	client := adminClient(b)
	empty := testcluster.Namespace(b, client)
	floorRSS, floorSync := syncedRSS(b, empty)

	ns := testcluster.Namespace(b, client)
	const count, size = 5000, 16 << 10
	payload := make([]byte, size*3/4)
	_, _ = rand.Read(payload)
	value := base64.StdEncoding.EncodeToString(payload) // 16 KiB of text, different per object below
	parallel(b, count, func(i int) {
		createCM(b, client, ns, fmt.Sprintf("cm-%05d", i), map[string]string{"config.yaml": strconv.Itoa(i) + value[len(strconv.Itoa(i)):]})
	})
	b.ResetTimer()
	rss, syncTime := syncedRSS(b, ns)
	b.StopTimer()
	b.ReportMetric(float64(floorRSS)/1024, "RSS-MiB-0-configmaps")
	b.ReportMetric(float64(rss)/1024, "RSS-MiB-5000x16KiB")
	b.ReportMetric(float64((rss-floorRSS)*1024)/float64(count*size), "RSS-bytes-per-config-byte")
	b.ReportMetric(floorSync.Seconds(), "sync-s-0-configmaps")
	b.ReportMetric(syncTime.Seconds(), "sync-s-5000x16KiB")
}

// syncedRSS starts wave on ns, waits until /readyz says its caches are synced, lets it settle
// and returns its resident memory and the time to ready.
func syncedRSS(b *testing.B, ns string) (int, time.Duration) {
	start := time.Now()
	p := startWave(b, ns)
	took := time.Since(start)
	time.Sleep(5 * time.Second)
	rss, _ := memKiB(b, p.Cmd.Process.Pid)
	p.Stop(10 * time.Second)
	return rss, took
}

func parallel(b *testing.B, n int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

func stats(d []time.Duration) (median, worst time.Duration) {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2], s[len(s)-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// memKiB reads VmRSS and VmHWM (peak) of a process.
func memKiB(b *testing.B, pid int) (rss, peak int) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(b, err)
	for _, line := range strings.Split(string(status), "\n") {
		for prefix, dst := range map[string]*int{"VmRSS:": &rss, "VmHWM:": &peak} {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				*dst, err = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				require.NoError(b, err)
			}
		}
	}
	return rss, peak
}
