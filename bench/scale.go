package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
)

// ScalePoint is wave started on a namespace holding Objects ConfigMaps and Secrets (half
// each, 1 KiB of data each) and Workloads opted-in Deployments that use some of them.
type ScalePoint struct {
	Objects   int     `json:"objects"`
	Workloads int     `json:"workloads"`
	ReadyS    float64 `json:"ready_s"`      // start → /readyz (every informer listed)
	SettledS  float64 `json:"settled_s"`    // start → every workload reconciled against its record
	RSSMiB    float64 `json:"rss_mib"`      // 3 s after settling
	PeakMiB   float64 `json:"peak_rss_mib"` // VmHWM: the most it held, during the initial lists
	// FileMiB is the part of RSS that is pages of wave's own binary (RssFile).
	FileMiB float64 `json:"rss_file_mib"`
	// At the largest point only: the Go heap's spans in use when RSS was read, and the live
	// heap after a collection (what the heap profile shows).
	HeapInuseMiB float64 `json:"heap_inuse_mib,omitempty"`
	HeapLiveMiB  float64 `json:"heap_live_mib,omitempty"`
	// Latency, at the largest point only: ConfigMap patch → new template hash on a workload
	// that uses it, against the floor (watch event + one PATCH) in the same namespace.
	Latency *Stats `json:"latency,omitempty"`
	Floor   *Stats `json:"floor,omitempty"`
	// HeapTop, at the largest point only: `go tool pprof -top` of wave's heap (in use), taken
	// through Stakater Reloader's --enable-pprof once wave settled.
	HeapTop string `json:"heap_top,omitempty"`
}

// waveScale is issue 14's scale goal: up to 100,000 ConfigMaps and Secrets of 1 KiB and 10,000
// opted-in workloads in one run. The workloads are created once, and recorded by a first wave
// (one baseline patch each); each point then adds objects and starts a fresh wave, whose job
// at start is to list everything and find every record up to date.
func waveScale(e *env, r *report) error {
	r.Scale = nil // -merge starts from the last report: this run's points replace its points
	points := []int{2000, 5000}
	workloads := 1000
	if e.full {
		points = []int{10000, 25000, 50000, 100000}
		workloads = 10000
	}
	used := points[0] / 2 // the ConfigMaps (and Secrets) that workloads use: those of the first point
	payload := make([]byte, 768)
	_, _ = rand.Read(payload)
	value := base64.StdEncoding.EncodeToString(payload) // 1 KiB
	sized := func(i int) string { return strconv.Itoa(i) + value[len(strconv.Itoa(i)):] }
	ns, err := e.namespace("scale")
	if err != nil {
		return err
	}
	have := 0 // ConfigMaps, and as many Secrets, created so far
	grow := func(objects int) error {
		n := objects / 2
		err := parallelN(16, n-have, func(j int) error {
			i := have + j
			if err := e.createConfigMap(ns, fmt.Sprintf("cm-%d", i), map[string]string{"a": sized(i)}); err != nil {
				return err
			}
			_, err := e.client.CoreV1().Secrets(ns).Create(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%d", i)},
				Data: map[string][]byte{"key": []byte(sized(i))}}, metav1.CreateOptions{})
			return err
		})
		if err == nil {
			have = n
		}
		return err
	}
	t := time.Now()
	if err := grow(points[0]); err != nil {
		return err
	}
	// Deployment i reads key "a" of ConfigMap cm-(i mod used) and mounts Secret s-(i mod used).
	if err := parallelN(16, workloads, func(i int) error {
		d := testcluster.Deployment(ns, fmt.Sprintf("app-%d", i), 0)
		d.Annotations = map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}
		pod := &d.Spec.Template.Spec
		pod.Containers[0].Env = []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: fmt.Sprintf("cm-%d", i%used)}, Key: "a"}}}}
		pod.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: fmt.Sprintf("s-%d", i%used)}}}}
		_, err := e.client.AppsV1().Deployments(ns).Create(e.ctx, d, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	probe := testcluster.Deployment(ns, "floor-probe", 0)
	if _, err := e.client.AppsV1().Deployments(ns).Create(e.ctx, probe, metav1.CreateOptions{}); err != nil {
		return err
	}
	fmt.Fprintf(e.log, "   %d objects and %d workloads created in %s\n", points[0], workloads, time.Since(t).Round(time.Second))
	p, err := e.startWave(ns)
	if err != nil {
		return err
	}
	err = waitBaselines(e, p, workloads)
	p.stop()
	if err != nil {
		return err
	}
	for k, objects := range points {
		t := time.Now()
		if err := grow(objects); err != nil {
			return err
		}
		fmt.Fprintf(e.log, "   %d objects (%s to add)\n", objects, time.Since(t).Round(time.Second))
		pt, err := measureScalePoint(e, ns, objects, workloads, k == len(points)-1)
		if err != nil {
			return err
		}
		r.Scale = append(r.Scale, pt)
	}
	return nil
}

// measureScalePoint starts a fresh wave on the objects and workloads of ns and measures it
// once it found every record up to date; at the last point, also its heap and its latency.
func measureScalePoint(e *env, ns string, objects, workloads int, last bool) (ScalePoint, error) {
	runtime.GC()
	pt := ScalePoint{Objects: objects, Workloads: workloads}
	var extra []string
	pprofAddr, err := freeAddr()
	if err != nil {
		return pt, err
	}
	if last {
		extra = []string{"--enable-pprof", "--pprof-addr=" + pprofAddr}
	}
	t0 := time.Now()
	p, err := e.startWave(ns, extra...)
	if err != nil {
		return pt, err
	}
	pt.ReadyS = time.Since(t0).Seconds()
	if err := waitFor(e.ctx, 10*time.Minute, func() bool {
		return p.metric(`configwave_wave_reconciles_total{result="unchanged"}`) >= float64(workloads)
	}); err != nil {
		p.stop()
		return pt, fmt.Errorf("%d objects: wave did not find every record up to date: %w", objects, err)
	}
	pt.SettledS = time.Since(t0).Seconds()
	time.Sleep(3 * time.Second)
	pt.RSSMiB = float64(rssKiB(p.cmd.Process.Pid)) / 1024
	pt.PeakMiB = float64(peakRSSKiB(p.cmd.Process.Pid)) / 1024
	pt.FileMiB = float64(statusKiB(p.cmd.Process.Pid, "RssFile")) / 1024
	if last {
		pt.HeapInuseMiB = p.metric("go_memstats_heap_inuse_bytes") / (1 << 20)
		if pt.HeapTop, err = heapTop(e, pprofAddr); err != nil {
			p.stop()
			return pt, err
		}
		pt.HeapLiveMiB = p.metric("go_memstats_heap_alloc_bytes") / (1 << 20) // just after heapTop's collection
		lat, err := measureWave(e, p, ns)
		if err != nil {
			p.stop()
			return pt, err
		}
		pt.Latency, pt.Floor = &lat.Latency, &lat.Floor
	}
	p.stop()
	return pt, nil
}

// heapTop fetches wave's heap profile and returns the top lines of what it holds. gc=1: the
// profile is of the live heap after a collection; without it, it is as of the last
// collection, which at rest may have been in the middle of the start-up burst.
func heapTop(e *env, addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?gc=1")
	if err != nil {
		return "", fmt.Errorf("fetch wave's heap profile: %w", err)
	}
	defer resp.Body.Close()
	path := filepath.Join(e.cluster.Dir(), "wave-heap.pb.gz")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=15", "-sample_index=inuse_space", path).Output()
	if err != nil {
		return "", fmt.Errorf("go tool pprof: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
