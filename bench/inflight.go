package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// InFlightCap is one ConfigMap shared by Deployments whose pods take minReadySeconds to become
// available, changed with and without --max-rollouts-in-flight (issue 61 item 3): how long
// until every Deployment rolled out, and how much of the cluster was replacing pods at once.
type InFlightCap struct {
	Deployments     int           `json:"deployments"`
	Replicas        int           `json:"replicas"`
	MinReadySeconds int           `json:"min_ready_seconds"`
	Rows            []InFlightRow `json:"rows"`
}

// InFlightRow is one setting of the cap (0: none), over Changes changes.
type InFlightRow struct {
	Cap     int   `json:"cap"`
	Changes int   `json:"changes"`
	All     Stats `json:"until_all_rolled_out"` // ConfigMap PATCH sent → every Deployment complete on the new template
	// The peaks are the largest seen over the changes: ReplicaSets that own a pod (n at rest),
	// pods not yet available (not Ready, or Ready for less than minReadySeconds, as the bench's
	// watch saw them), and wave's own configwave_wave_workloads{state="rolling"}, sampled
	// every 100 ms.
	PeakReplicaSets int `json:"peak_replicasets_with_pods"`
	PeakUnavailable int `json:"peak_pods_not_yet_available"`
	PeakRolling     int `json:"peak_rolling_by_wave"`
	all             []time.Duration
}

// minReadySeconds is how long a new pod of the fan-out takes to count as available.
const minReadySeconds = 2

func waveInFlightCap(e *env, r *report) error {
	n, capK := e.reps(20, 100), e.reps(5, 10)
	c := &InFlightCap{Deployments: n, Replicas: 1, MinReadySeconds: minReadySeconds}
	ns, err := e.namespace("inflight")
	if err != nil {
		return err
	}
	if err := e.createConfigMap(ns, "shared", map[string]string{"a": "0"}); err != nil {
		return err
	}
	if err := parallel(n, func(i int) error {
		d := testcluster.Deployment(ns, fmt.Sprintf("app-%d", i), int32(c.Replicas))
		d.Annotations = map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}
		d.Spec.MinReadySeconds = int32(c.MinReadySeconds)
		d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}, Key: "a"}}}}
		_, err := e.client.AppsV1().Deployments(ns).Create(e.ctx, d, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	rows := map[int]*InFlightRow{0: {Cap: 0}, capK: {Cap: capK}}
	change := 0
	// The two settings alternate, and take turns going first, so that neither runs only on a
	// quieter cluster; each change begins once every Deployment is complete (the ones created
	// here, or the change before) and kube-controller-manager has no rollout of an earlier
	// step left in this namespace.
	for round := 0; round < e.reps(1, 3); round++ {
		order := []int{0, capK}
		if round%2 == 1 {
			order = []int{capK, 0}
		}
		for _, k := range order {
			change++
			if err := waitAllComplete(e, ns, n); err != nil {
				return fmt.Errorf("before change %d: %w", change, err)
			}
			if err := inFlightChange(e, ns, n, k, change, rows[k]); err != nil {
				return fmt.Errorf("cap %d, change %d: %w", k, change, err)
			}
		}
	}
	c.Rows = []InFlightRow{*rows[0], *rows[capK]}
	r.InFlight = c
	return nil
}

// inFlightChange starts wave with the cap k (0: none), waits until every Deployment is rolled
// out and recorded, changes the ConfigMap and follows the fan-out to its end.
func inFlightChange(e *env, ns string, n, k, change int, row *InFlightRow) error {
	args := []string{"--kube-api-qps=200", "--kube-api-burst=400"}
	if k > 0 {
		args = append(args, "--max-rollouts-in-flight="+strconv.Itoa(k))
	}
	p, err := e.startWave(ns, args...)
	if err != nil {
		return err
	}
	defer p.stop()
	// The first wave records each Deployment (a Deployment recorded after the change would not
	// roll); a later one finds the records, and sees every change after it is ready.
	if change == 1 {
		if err := waitBaselines(e, p, n); err != nil {
			return err
		}
	}
	rolling := 0
	var mu sync.Mutex
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // wave's own count of the rollouts it follows
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			v := int(p.metric(`configwave_wave_workloads{state="rolling"}`))
			mu.Lock()
			rolling = max(rolling, v)
			mu.Unlock()
		}
	}()
	took, peakRS, peakUnavailable, err := rollAll(e, ns, n, time.Duration(minReadySeconds)*time.Second, func() error {
		return e.patchConfigMap(ns, "shared", "a", strconv.Itoa(change))
	})
	close(stop)
	<-sampled
	if err != nil {
		return err
	}
	row.Changes++
	row.all = append(row.all, took)
	row.All = stats(row.all)
	row.PeakReplicaSets = max(row.PeakReplicaSets, peakRS)
	row.PeakUnavailable = max(row.PeakUnavailable, peakUnavailable)
	row.PeakRolling = max(row.PeakRolling, rolling)
	return nil
}

// waitAllComplete waits until the n Deployments of ns are complete on their templates, as
// kubectl rollout status judges them, and no pod of an old ReplicaSet is left.
func waitAllComplete(e *env, ns string, n int) error {
	return waitFor(e.ctx, 10*time.Minute, func() bool {
		time.Sleep(100 * time.Millisecond) // a poll of the API, not a spin
		list, err := e.client.AppsV1().Deployments(ns).List(e.ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != n {
			return false
		}
		for i := range list.Items {
			if !testcluster.DeploymentComplete(&list.Items[i]) {
				return false
			}
		}
		return true
	})
}

// rollAll runs begin and follows the namespace's Deployments and pods on watches until every
// Deployment has rolled out a template whose inputs hash changed: how long that took, and the
// peaks of ReplicaSets running pods and of pods not yet available on the way. Both peaks are
// counted from the pods themselves: kube-controller-manager's status updates share its client's
// rate limit with its creates, and lag behind them in a fan-out.
func rollAll(e *env, ns string, n int, minReady time.Duration, begin func() error) (took time.Duration, peakRS, peakUnavailable int, err error) {
	deps, err := e.client.AppsV1().Deployments(ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, 0, err
	}
	pods, err := e.client.CoreV1().Pods(ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, 0, err
	}
	dw, err := e.client.AppsV1().Deployments(ns).Watch(e.ctx, metav1.ListOptions{ResourceVersion: deps.ResourceVersion})
	if err != nil {
		return 0, 0, 0, err
	}
	defer dw.Stop()
	pw, err := e.client.CoreV1().Pods(ns).Watch(e.ctx, metav1.ListOptions{ResourceVersion: pods.ResourceVersion})
	if err != nil {
		return 0, 0, 0, err
	}
	defer pw.Stop()
	f := newFanOutFollower(deps.Items, pods.Items, minReady)
	t0 := time.Now()
	if err := begin(); err != nil {
		return 0, 0, 0, err
	}
	timeout := time.After(10 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond) // a pod becomes available with time alone
	defer tick.Stop()
	for f.done() < n {
		select {
		case ev, ok := <-dw.ResultChan():
			if !ok {
				return 0, 0, 0, fmt.Errorf("the Deployments' watch closed")
			}
			if d, ok := ev.Object.(*appsv1.Deployment); ok && ev.Type != watch.Deleted {
				f.deployment(d)
			}
		case ev, ok := <-pw.ResultChan():
			if !ok {
				return 0, 0, 0, fmt.Errorf("the pods' watch closed")
			}
			if p, ok := ev.Object.(*corev1.Pod); ok {
				f.pod(p, ev.Type == watch.Deleted, time.Now())
			}
		case <-tick.C:
		case <-timeout:
			return 0, 0, 0, fmt.Errorf("%d of %d Deployments rolled out after 10 minutes", f.done(), n)
		}
		peakRS, peakUnavailable = max(peakRS, f.withPods()), max(peakUnavailable, f.unavailable(time.Now()))
	}
	return time.Since(t0), peakRS, peakUnavailable, nil
}

// fanOutFollower is what rollAll knows of the namespace: each Deployment's inputs hash before
// the change, and each pod's ReplicaSet and when it was first seen Ready.
type fanOutFollower struct {
	minReady time.Duration
	before   map[string]string
	counted  map[string]bool // Deployments rolled out on a new hash
	pods     map[string]podSeen
}

type podSeen struct {
	owner string
	ready time.Time // zero: not Ready yet
}

func newFanOutFollower(deps []appsv1.Deployment, pods []corev1.Pod, minReady time.Duration) *fanOutFollower {
	f := &fanOutFollower{minReady: minReady, before: map[string]string{}, counted: map[string]bool{}, pods: map[string]podSeen{}}
	for i := range deps {
		f.before[deps[i].Name] = deps[i].Spec.Template.Annotations[rollout.InputsHashAnnotation]
	}
	long := time.Now().Add(-time.Hour) // Ready before the change: available
	for i := range pods {
		f.pod(&pods[i], false, long)
	}
	return f
}

// pod notes a pod of a ReplicaSet; one being deleted is left out, as the ReplicaSet's own
// status.replicas leaves it out.
func (f *fanOutFollower) pod(p *corev1.Pod, deleted bool, now time.Time) {
	ref := metav1.GetControllerOf(p)
	if deleted || p.DeletionTimestamp != nil || ref == nil || ref.Kind != "ReplicaSet" {
		delete(f.pods, p.Name)
		return
	}
	seen := f.pods[p.Name]
	seen.owner = ref.Name
	ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
	switch {
	case !ready:
		seen.ready = time.Time{}
	case seen.ready.IsZero():
		seen.ready = now
	}
	f.pods[p.Name] = seen
}

func (f *fanOutFollower) deployment(d *appsv1.Deployment) {
	if d.Spec.Template.Annotations[rollout.InputsHashAnnotation] != f.before[d.Name] && testcluster.DeploymentComplete(d) {
		f.counted[d.Name] = true
	}
}

func (f *fanOutFollower) done() int { return len(f.counted) }

// withPods counts the ReplicaSets that own a pod.
func (f *fanOutFollower) withPods() int {
	owners := map[string]bool{}
	for _, p := range f.pods {
		owners[p.owner] = true
	}
	return len(owners)
}

// unavailable counts the pods not Ready, or Ready for less than minReadySeconds.
func (f *fanOutFollower) unavailable(now time.Time) int {
	n := 0
	for _, p := range f.pods {
		if p.ready.IsZero() || now.Sub(p.ready) < f.minReady {
			n++
		}
	}
	return n
}

func (c *InFlightCap) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### A change shared by %d Deployments, with and without `--max-rollouts-in-flight`\n\n"+
		"One ConfigMap read by %d Deployments of %d replica each, `minReadySeconds: %d` (so each rollout takes that long at least; the kwok node readies pods at once), changed with wave's cap off and on, alternately, wave started anew for each change. Until all: ConfigMap PATCH sent → every Deployment complete on its new template (seen on a watch). Peaks over the changes, counted from the pods on a watch (kube-controller-manager's status updates lag behind its creates in a fan-out): ReplicaSets that own a pod (%d at rest), pods not yet available (not Ready, or Ready for less than `minReadySeconds`), and wave's own `configwave_wave_workloads{state=\"rolling\"}`, sampled every 100 ms.\n\n",
		c.Deployments, c.Deployments, c.Replicas, c.MinReadySeconds, c.Deployments)
	b.WriteString(row("`--max-rollouts-in-flight`", "changes", "until all, median s", "max s", "peak ReplicaSets with pods", "peak pods not yet available", "peak rolling (wave)"))
	b.WriteString(row("---", "---", "---", "---", "---", "---", "---"))
	rows := slices.Clone(c.Rows)
	slices.SortFunc(rows, func(a, b InFlightRow) int { return a.Cap - b.Cap })
	for _, r := range rows {
		name := strconv.Itoa(r.Cap)
		if r.Cap == 0 {
			name = "0 (no cap)"
		}
		b.WriteString(row(name, r.Changes, f2(r.All.Median/1000), f2(r.All.Max/1000), r.PeakReplicaSets, r.PeakUnavailable, r.PeakRolling))
	}
	return b.String()
}
