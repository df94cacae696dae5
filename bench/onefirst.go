package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OneFirst is --rollout=one-first against all-at-once: the time from a ConfigMap patch until
// the last of N pods' apps was told of the good change, and the API requests it costs.
type OneFirst struct {
	SoakS float64       `json:"soak_s"`
	Rows  []OneFirstRow `json:"rows"`
}

// OneFirstRow is one way of taking a change, on N pods.
type OneFirstRow struct {
	Rollout string `json:"rollout"`
	Pods    int    `json:"pods"`
	Changes int    `json:"changes"`
	// UntilLast is from the patch to the last app told of the change.
	UntilLast Stats `json:"until_last_ms"`
	// Requests are one-first's API requests (the Lease, the pod's Ready) per pod per change.
	Requests float64 `json:"api_requests_per_pod_per_change"`
}

// oneFirstSoak is short, so that the rows measure the pace the soak sets, not the soak itself.
const oneFirstSoak = 2 * time.Second

// reloaderOneFirst runs N sidecars against the control plane as the pods of one StatefulSet
// (pods that no node runs: their Ready condition is set here, as kubelet would), for each way
// of taking a change, and patches their ConfigMap.
func reloaderOneFirst(e *env, r *report) error {
	out := &OneFirst{SoakS: oneFirstSoak.Seconds()}
	for _, n := range []int{4, 10} {
		for _, rollout := range [][]string{
			{"all-at-once"},
			{"one-first, max-unavailable 1", "--rollout=one-first", "--rollout-soak=" + oneFirstSoak.String(), "--rollout-max-unavailable=1"},
			{"one-first, max-unavailable 25%", "--rollout=one-first", "--rollout-soak=" + oneFirstSoak.String(), "--rollout-max-unavailable=25%"},
		} {
			row, err := oneFirstRow(e, n, rollout[0], rollout[1:])
			if err != nil {
				return fmt.Errorf("%s, %d pods: %w", rollout[0], n, err)
			}
			out.Rows = append(out.Rows, row)
		}
	}
	r.OneFirst = out
	return nil
}

func oneFirstRow(e *env, n int, name string, flags []string) (OneFirstRow, error) {
	row := OneFirstRow{Rollout: name, Pods: n, Changes: e.reps(1, 3)}
	ns, err := e.namespace("onefirst")
	if err != nil {
		return row, err
	}
	if err := e.createConfigMap(ns, "app", map[string]string{"app.yaml": "v0"}); err != nil {
		return row, err
	}
	pods, err := e.statefulPods(ns, n)
	if err != nil {
		return row, err
	}
	procs := make([]*proc, n)
	apps := make([]*fakeApp, n)
	defer func() {
		for i := range n {
			if procs[i] != nil {
				procs[i].stop()
			}
			if apps[i] != nil {
				_ = apps[i].srv.Close()
			}
		}
	}()
	roots := make([]string, n)
	for i, pod := range pods {
		if apps[i], err = newFakeApp(); err != nil {
			return row, err
		}
		if roots[i], err = os.MkdirTemp("", "onefirst-"); err != nil {
			return row, err
		}
		defer os.RemoveAll(roots[i])
		args := append([]string{"--kubeconfig=" + e.cluster.Kubeconfig(), "--namespace=" + ns, "--configmap=app", "--configroot=" + roots[i], "--reload-http=" + apps[i].url}, flags...)
		if procs[i], err = startEnv(e.reloader, nil, []string{"POD_NAME=" + pod, "POD_NAMESPACE=" + ns}, args...); err != nil {
			return row, err
		}
	}
	for _, p := range procs {
		if err := p.waitReady(time.Minute); err != nil {
			return row, err
		}
	}
	var took []time.Duration
	for c := 1; c <= row.Changes; c++ {
		want := fmt.Sprintf("v%d", c)
		patched := time.Now()
		if err := e.patchConfigMap(ns, "app", "app.yaml", want); err != nil {
			return row, err
		}
		var last time.Time
		for i := range n {
			at, err := toldOf(apps[i], roots[i], want, 2*time.Minute)
			if err != nil {
				return row, fmt.Errorf("pod %d: %w", i, err)
			}
			last = maxTime(last, at)
		}
		took = append(took, last.Sub(patched))
		time.Sleep(oneFirstSoak) // the last batch's soak ends before the next change
	}
	row.UntilLast = stats(took)
	total := 0.0
	for _, p := range procs {
		total += p.metric("configwave_reloader_rollout_api_requests_total")
	}
	row.Requests = total / float64(n*row.Changes)
	return row, nil
}

// toldOf waits for the app's reload request after which its file holds want; it returns when
// that request came.
func toldOf(a *fakeApp, root, want string, timeout time.Duration) (time.Time, error) {
	deadline := time.After(timeout)
	for {
		select {
		case at := <-a.arrived:
			if b, _ := os.ReadFile(filepath.Join(root, "app.yaml")); strings.TrimSpace(string(b)) == want {
				return at, nil
			}
		case <-deadline:
			return time.Time{}, fmt.Errorf("never told of %s", want)
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// statefulPods makes a StatefulSet of n pods that no node runs (a node selector nothing
// matches) and sets each pod Ready, as kubelet would; it returns the pods' names.
func (e *env) statefulPods(ns string, n int) ([]string, error) {
	replicas := int32(n)
	labels := map[string]string{"app": "onefirst"}
	_, err := e.client.AppsV1().StatefulSets(ns).Create(e.ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"configwave.io/bench": "no-node"},
				Containers:   []corev1.Container{{Name: "app", Image: "app"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("web-%d", i)
		if err := waitFor(e.ctx, time.Minute, func() bool {
			pod, err := e.client.CoreV1().Pods(ns).Get(e.ctx, names[i], metav1.GetOptions{})
			if err != nil {
				return false
			}
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
			_, err = e.client.CoreV1().Pods(ns).UpdateStatus(e.ctx, pod, metav1.UpdateOptions{})
			return err == nil
		}); err != nil {
			return nil, fmt.Errorf("pod %s: %w", names[i], err)
		}
	}
	return names, nil
}

func (o *OneFirst) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### One pod first (`--rollout=one-first`)\n\nN sidecars as the pods of one StatefulSet (pods no node runs; their Ready condition set as kubelet would), all through the API server; ConfigMap patch → the last app told of the good change. `--rollout-soak=%gs`, so a one-first row is about the soak times one plus the batches, against all-at-once, the peers' way, in the same run. API requests: one-first's own (the Lease it shares with the other sidecars, its pod's Ready condition), per pod per change.\n\n", o.SoakS)
	b.WriteString(row("rollout", "pods", "changes", "patch → last app told, median s", "max s", "API requests per pod per change"))
	b.WriteString(row("---", "---", "---", "---", "---", "---"))
	for _, r := range o.Rows {
		b.WriteString(row(r.Rollout, r.Pods, r.Changes, fmt.Sprintf("%.2f", r.UntilLast.Median/1000), fmt.Sprintf("%.2f", r.UntilLast.Max/1000), f1(r.Requests)))
	}
	return b.String()
}
