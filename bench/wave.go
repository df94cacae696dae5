package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// deployments creates n opted-in Deployments with 0 replicas (the measure is wave's, not the
// scheduler's); Deployment i reads key "a" of ConfigMap cm(i).
func (e *env) deployments(ns string, n int, cm func(i int) string) error {
	return parallel(n, func(i int) error {
		d := testcluster.Deployment(ns, fmt.Sprintf("app-%d", i), 0)
		d.Annotations = map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}
		d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: cm(i)}, Key: "a"}}}}
		_, err := e.client.AppsV1().Deployments(ns).Create(e.ctx, d, metav1.CreateOptions{})
		return err
	})
}

func (e *env) startWave(ns string, extra ...string) (*proc, error) {
	// --coalesce=0: these figures are wave's own latency against the floor; the default
	// --coalesce adds its 200 ms on purpose, to roll a ConfigMap and a Secret changed
	// together once. --flapping-threshold=0: a bench writes like a machine, many changes a
	// minute, which the default brake would hold.
	p, err := start(e.wave, nil, append([]string{"--kubeconfig=" + e.cluster.Kubeconfig(), "--namespaces=" + ns, "--coalesce=0", "--flapping-threshold=0"}, extra...)...)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(5 * time.Minute); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// waitBaselines waits until wave recorded the inputs of n workloads.
func waitBaselines(e *env, p *proc, n int) error {
	return waitFor(e.ctx, 10*time.Minute, func() bool {
		return p.metric(`configwave_wave_patches_total{kind="Deployment",type="baseline"}`) >= float64(n)
	})
}

// waveLatency: ConfigMap patch → template annotation patched, with n opted-in Deployments
// each on its own ConfigMap. Floor: the watch event plus one PATCH round trip.
func waveLatency(e *env, r *report) error {
	r.WaveLatency = nil // -merge starts from the last report: this run's figures replace its own
	sizes := []int{1, 100}
	if e.full {
		sizes = append(sizes, 1000)
	}
	for _, n := range sizes {
		ns, err := e.namespace(fmt.Sprintf("wave-%d", n))
		if err != nil {
			return err
		}
		if err := parallel(n, func(i int) error { return e.createConfigMap(ns, fmt.Sprintf("cm-%d", i), map[string]string{"a": "0"}) }); err != nil {
			return err
		}
		if err := e.deployments(ns, n, func(i int) string { return fmt.Sprintf("cm-%d", i) }); err != nil {
			return err
		}
		// A Deployment nobody watches, for the floor's PATCH round trip.
		probe := testcluster.Deployment(ns, "floor-probe", 0)
		if _, err := e.client.AppsV1().Deployments(ns).Create(e.ctx, probe, metav1.CreateOptions{}); err != nil {
			return err
		}
		p, err := e.startWave(ns)
		if err != nil {
			return err
		}
		if err := waitBaselines(e, p, n); err != nil {
			p.stop()
			return err
		}
		s, err := measureWave(e, p, ns)
		p.stop()
		if err != nil {
			return err
		}
		s.Deployments = n
		r.WaveLatency = append(r.WaveLatency, s)
	}
	return nil
}

func measureWave(e *env, p *proc, ns string) (WaveLatency, error) {
	cmW, err := e.client.CoreV1().ConfigMaps(ns).Watch(e.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "cm-0").String()})
	if err != nil {
		return WaveLatency{}, err
	}
	defer cmW.Stop()
	dW, err := e.client.AppsV1().Deployments(ns).Watch(e.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "app-0").String()})
	if err != nil {
		return WaveLatency{}, err
	}
	defer dW.Stop()
	var lat, floor []time.Duration
	last := ""
	reqBefore := p.metric(`configwave_wave_api_requests_total{client="workloads"`)
	byBefore := requestsByClient(p)
	n := e.reps(20, 50)
	for i := 1; i <= n; i++ {
		t0 := time.Now()
		if err := e.patchConfigMap(ns, "cm-0", "a", strconv.Itoa(i)); err != nil {
			return WaveLatency{}, err
		}
		if err := nextEvent(cmW, watch.Modified); err != nil {
			return WaveLatency{}, err
		}
		if _, err := e.client.AppsV1().Deployments(ns).Patch(e.ctx, "floor-probe", types.MergePatchType,
			fmt.Appendf(nil, `{"metadata":{"annotations":{"probe":"%d"}}}`, i), metav1.PatchOptions{}); err != nil {
			return WaveLatency{}, err
		}
		floor = append(floor, time.Since(t0))
		if err := waitDeployment(dW, func(d *appsv1.Deployment) bool {
			h := d.Spec.Template.Annotations[rollout.InputsHashAnnotation]
			if h != "" && h != last {
				last = h
				return true
			}
			return false
		}); err != nil {
			return WaveLatency{}, err
		}
		lat = append(lat, time.Since(t0))
	}
	time.Sleep(200 * time.Millisecond)
	reqs := (p.metric(`configwave_wave_api_requests_total{client="workloads"`) - reqBefore) / float64(n)
	by := map[string]float64{}
	for k, v := range requestsByClient(p) {
		if d := v - byBefore[k]; d > 0 {
			by[k] = d / float64(n)
		}
	}
	return WaveLatency{Changes: n, Latency: stats(lat), Floor: stats(floor), RequestsPerChange: reqs, ByClient: by, RSSMiB: float64(rssKiB(p.cmd.Process.Pid)) / 1024}, nil
}

// looksByResult reads wave's reconcile counters as result → count.
func looksByResult(p *proc) map[string]float64 {
	out := map[string]float64{}
	for _, r := range rollout.Results {
		if v := p.metric(`configwave_wave_reconciles_total{result="` + r + `"}`); v > 0 {
			out[r] = v
		}
	}
	return out
}

// requestsByClient reads wave's API request counters as "client method" → count.
func requestsByClient(p *proc) map[string]float64 {
	out := map[string]float64{}
	for _, c := range []string{"workloads", "events", "pods"} {
		for _, m := range []string{"GET", "LIST", "WATCH", "PATCH", "POST", "PUT", "DELETE"} {
			if v := p.metric(`configwave_wave_api_requests_total{client="` + c + `",method="` + m + `"}`); v > 0 {
				out[c+" "+m] = v
			}
		}
	}
	if len(out) == 0 { // a wave from before the client label (a before/after run)
		for _, m := range []string{"GET", "LIST", "WATCH", "PATCH", "POST", "PUT", "DELETE"} {
			if v := p.metric(`configwave_wave_api_requests_total{method="` + m + `"}`); v > 0 {
				out["all "+m] = v
			}
		}
	}
	return out
}

func waitDeployment(w watch.Interface, match func(*appsv1.Deployment) bool) error {
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch closed")
			}
			if d, ok := ev.Object.(*appsv1.Deployment); ok && match(d) {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("no matching Deployment event within 60s")
		}
	}
}

// waveShared: one ConfigMap shared by n Deployments; time until the last one is patched.
func waveShared(e *env, r *report) error {
	n := e.reps(100, 1000)
	ns, err := e.namespace("shared")
	if err != nil {
		return err
	}
	if err := e.createConfigMap(ns, "shared", map[string]string{"a": "0"}); err != nil {
		return err
	}
	if err := e.deployments(ns, n, func(int) string { return "shared" }); err != nil {
		return err
	}
	var pprofArgs []string
	pprofAddr, err := freeAddr()
	if err != nil {
		return err
	}
	if waveCPUProfile != "" {
		pprofArgs = []string{"--enable-pprof", "--pprof-addr=" + pprofAddr}
	}
	p, err := e.startWave(ns, pprofArgs...)
	if err != nil {
		return err
	}
	defer p.stop()
	if err := waitBaselines(e, p, n); err != nil {
		return err
	}
	floorClient, err := barePatchClient(e)
	if err != nil {
		return err
	}
	// wave's changes and the floor's alternate, so that neither runs only on a quieter cluster:
	// both make kube-controller-manager write the same new ReplicaSets afterwards, at its own
	// 20 requests a second, for minutes; each change runs beside the tail of the one before.
	var waves, floors []time.Duration
	var ratios []float64
	reps := e.reps(3, 5)
	byClient := map[string]float64{} // wave's API requests per Deployment per change
	looks := map[string]float64{}    // wave's looks per Deployment per change
	ticks := 0                       // wave's CPU during its changes
	for i := 1; i <= reps; i++ {
		reqs, looks0, ticks0 := requestsByClient(p), looksByResult(p), cpuTicks(p.cmd.Process.Pid)
		profiled := make(chan error, 1)
		if waveCPUProfile != "" && i == 1 {
			go func() { profiled <- cpuProfile(pprofAddr, 5, waveCPUProfile) }()
			time.Sleep(100 * time.Millisecond) // the profile has begun
		} else {
			profiled <- nil
		}
		w, err := waveFanOut(e, ns, n, i)
		if err != nil {
			return err
		}
		if err := <-profiled; err != nil {
			return fmt.Errorf("wave's CPU profile: %w", err)
		}
		time.Sleep(time.Second) // wave's Events and last writes done
		ticks += cpuTicks(p.cmd.Process.Pid) - ticks0
		for k, v := range requestsByClient(p) {
			byClient[k] += (v - reqs[k]) / float64(n*reps)
		}
		for k, v := range looksByResult(p) {
			if d := (v - looks0[k]) / float64(n*reps); d > 0 {
				looks[k] += d
			}
		}
		// wave is stopped while the floor runs, and sees the floor's writes after.
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		f, err := barePatchLoop(e, floorClient, ns, n, i)
		if cerr := p.cmd.Process.Signal(syscall.SIGCONT); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		time.Sleep(2 * time.Second) // wave has caught up with the floor's writes it saw after

		waves, floors, ratios = append(waves, w), append(floors, f), append(ratios, float64(w)/float64(f))
	}
	slices.Sort(ratios)
	r.Shared = &Shared{Deployments: n, Changes: reps, UntilLast: stats(waves), QPS: 200, Floor: stats(floors),
		RatioMin: ratios[0], RatioMedian: ratios[len(ratios)/2], RatioMax: ratios[len(ratios)-1], ByClient: byClient, Looks: looks,
		CPUSeconds: float64(ticks) / 100 / float64(reps)}
	return nil
}

// waveFanOut patches the shared ConfigMap and returns when wave has patched the last of the n
// Deployments (their template's inputs hash changed, seen on a watch).
func waveFanOut(e *env, ns string, n, i int) (time.Duration, error) {
	return fanOut(e, ns, n, rollout.InputsHashAnnotation, func() error {
		return e.patchConfigMap(ns, "shared", "a", strconv.Itoa(i))
	})
}

// fanOut runs begin and returns when the bench's watch has seen the template annotation named
// changed on all n Deployments. wave's fan-out and the floor's are timed this same way, so the
// watch's own cost (decoding every Deployment event, on the same two cores) falls on both.
func fanOut(e *env, ns string, n int, changed string, begin func() error) (time.Duration, error) {
	list, err := e.client.AppsV1().Deployments(ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	before := map[string]string{}
	for _, d := range list.Items {
		before[d.Name] = d.Spec.Template.Annotations[changed]
	}
	w, err := e.client.AppsV1().Deployments(ns).Watch(e.ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	seen := map[string]bool{}
	began := make(chan error, 1)
	t0 := time.Now()
	go func() {
		err := begin()
		if err != nil {
			w.Stop() // no wait for changes that will not come
		}
		began <- err
	}()
	err = waitDeployment(w, func(d *appsv1.Deployment) bool {
		if d.Spec.Template.Annotations[changed] != before[d.Name] {
			seen[d.Name] = true
		}
		return len(seen) == n
	})
	took := time.Since(t0)
	if berr := <-began; berr != nil {
		return 0, berr
	}
	return took, err
}

// barePatchClient is the floor's client, at wave's default --kube-api-qps and --kube-api-burst.
func barePatchClient(e *env) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(e.cluster.Config())
	cfg.QPS, cfg.Burst = 200, 400
	return kubernetes.NewForConfig(cfg)
}

// barePatchLoop is the floor of the shared-ConfigMap fan-out: the n Deployments' template
// annotation patched by a bare client with wave's default --workers, and nothing else. The
// same write as wave's, so kube-controller-manager makes the same new ReplicaSets meanwhile;
// timed as wave's is, until the bench's watch has seen the last one.
func barePatchLoop(e *env, client kubernetes.Interface, ns string, n, i int) (time.Duration, error) {
	const workers = 16
	body := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{%q:"%d"}}}}}`, floorAnnotation, i)
	return fanOut(e, ns, n, floorAnnotation, func() error {
		return parallelN(workers, n, func(j int) error {
			_, err := client.AppsV1().Deployments(ns).Patch(e.ctx, fmt.Sprintf("app-%d", j), types.MergePatchType, body, metav1.PatchOptions{})
			return err
		})
	})
}

// floorAnnotation is the template annotation the floor of the fan-out writes.
const floorAnnotation = "bench-floor"

// waveMemory: RSS and time to first full sync with many ConfigMaps and Secrets of 16 KiB.
func waveMemory(e *env, r *report) error {
	r.Memory = nil // -merge starts from the last report: this run's figures replace its own
	sizes := []int{0, 1000}
	if e.full {
		sizes = []int{0, 1000, 5000, 10000}
	}
	payload := make([]byte, 12<<10)
	_, _ = rand.Read(payload)
	value := base64.StdEncoding.EncodeToString(payload) // 16 KiB
	have := 0
	ns, err := e.namespace("memory")
	if err != nil {
		return err
	}
	for _, n := range sizes {
		// Grow the same namespace: objects [have, n) are new.
		if err := parallel(n-have, func(j int) error {
			i := have + j
			v := strconv.Itoa(i) + value[len(strconv.Itoa(i)):]
			if err := e.createConfigMap(ns, fmt.Sprintf("cm-%05d", i), map[string]string{"config.yaml": v}); err != nil {
				return err
			}
			_, err := e.client.CoreV1().Secrets(ns).Create(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%05d", i)},
				Data: map[string][]byte{"key.pem": []byte(v)}}, metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
		have = n
		runtime.GC()
		t0 := time.Now()
		p, err := e.startWave(ns)
		if err != nil {
			return err
		}
		sync := time.Since(t0)
		time.Sleep(3 * time.Second)
		rss := float64(rssKiB(p.cmd.Process.Pid)) / 1024
		p.stop()
		r.Memory = append(r.Memory, Memory{ConfigMaps: n, Secrets: n, ConfigMiB: float64(2*n*len(value)) / (1 << 20), RSSMiB: rss, SyncSeconds: sync.Seconds()})
	}
	return nil
}

// cpuProfile saves the CPU profile of the process serving pprof at addr over seconds to file.
func cpuProfile(addr string, seconds int, file string) error {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}
