package main

import (
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// Coalescing is what --coalesce's default is chosen from: the gap, as a watch sees it, between
// a ConfigMap and a Secret written one after the other by one client (what one kubectl apply
// or Helm upgrade does); and, with wave's default, how many rollouts and how long each pair
// takes.
type Coalescing struct {
	Pairs         int     `json:"pairs"`
	Gap           Stats   `json:"gap"`            // ConfigMap write answered → Secret write answered
	Default       float64 `json:"default_ms"`     // wave's --coalesce default
	Rollouts      int     `json:"rollouts"`       // with the default, over Pairs pairs
	Latency       Stats   `json:"latency"`        // ConfigMap PATCH sent → template changed, default --coalesce
	Floor         Stats   `json:"latency_floor"`  // the same with --coalesce=0
	RolloutsFloor int     `json:"rollouts_floor"` // with --coalesce=0, over Pairs pairs
}

// coalesceDefault must match cmd/wave's defaultCoalesce.
const coalesceDefault = 200 * time.Millisecond

func waveCoalescing(e *env, r *report) error {
	ns, err := e.namespace("coalesce")
	if err != nil {
		return err
	}
	if err := e.createConfigMap(ns, "cm", map[string]string{"a": "0"}); err != nil {
		return err
	}
	if _, err := e.client.CoreV1().Secrets(ns).Create(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"}, StringData: map[string]string{"p": "0"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	d := testcluster.Deployment(ns, "app", 0)
	d.Annotations = map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}
	d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}}}
	if _, err := e.client.AppsV1().Deployments(ns).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	c := &Coalescing{Pairs: e.reps(20, 60), Default: ms(coalesceDefault)}
	i := 0
	pair := func() (t0 time.Time, gap time.Duration, err error) { // one "apply": the ConfigMap, then the Secret
		i++
		t0 = time.Now()
		if err := e.patchConfigMap(ns, "cm", "a", strconv.Itoa(i)); err != nil {
			return t0, 0, err
		}
		tc := time.Now()
		_, err = e.client.CoreV1().Secrets(ns).Patch(e.ctx, "sec", types.MergePatchType, fmt.Appendf(nil, `{"stringData":{"p":"%d"}}`, i), metav1.PatchOptions{})
		return t0, time.Since(tc), err
	}
	for _, coalesce := range []string{"", "--coalesce=0"} {
		args := []string{"--kubeconfig=" + e.cluster.Kubeconfig(), "--namespaces=" + ns, "--flapping-threshold=0"} // pairs a second: a machine's rate
		if coalesce != "" {
			args = append(args, coalesce)
		}
		p, err := start(e.wave, nil, args...)
		if err != nil {
			return err
		}
		err = p.waitReady(time.Minute)
		if err == nil { // the first wave records the Deployment; the second finds the record
			err = waitFor(e.ctx, time.Minute, func() bool {
				return p.metric(`configwave_wave_reconciles_total{result="baseline"}`)+p.metric(`configwave_wave_reconciles_total{result="unchanged"}`) >= 1
			})
		}
		if err != nil {
			p.stop()
			return err
		}
		gaps, lat, rolls, err := measurePairs(e, p, ns, c.Pairs, pair)
		p.stop()
		if err != nil {
			return err
		}
		if coalesce == "" {
			c.Gap, c.Latency, c.Rollouts = stats(gaps), stats(lat), rolls
		} else {
			c.Floor, c.RolloutsFloor = stats(lat), rolls
		}
	}
	r.Coalescing = c
	return nil
}

// measurePairs writes n pairs, each once wave is done with the one before, and returns the
// gaps between the two writes (from the ConfigMap's answer to the Secret's: the server stores
// them at most that far apart), the latency to the first template change, and how many
// rollouts wave made.
func measurePairs(e *env, p *proc, ns string, n int, pair func() (time.Time, time.Duration, error)) (gaps, lat []time.Duration, rolls int, err error) {
	cmW, err := e.client.CoreV1().ConfigMaps(ns).Watch(e.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "cm").String()})
	if err != nil {
		return nil, nil, 0, err
	}
	defer cmW.Stop()
	sW, err := e.client.CoreV1().Secrets(ns).Watch(e.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "sec").String()})
	if err != nil {
		return nil, nil, 0, err
	}
	defer sW.Stop()
	dW, err := e.client.AppsV1().Deployments(ns).Watch(e.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "app").String()})
	if err != nil {
		return nil, nil, 0, err
	}
	defer dW.Stop()
	last := ""
	changed := func(d *appsv1.Deployment) bool {
		h := d.Spec.Template.Annotations[rollout.InputsHashAnnotation]
		if h != "" && h != last {
			last = h
			return true
		}
		return false
	}
	before := p.metric(`configwave_wave_reconciles_total{result="rolled"}`)
	for range n {
		t0, gap, err := pair()
		if err != nil {
			return nil, nil, 0, err
		}
		gaps = append(gaps, gap)
		if err := nextEvent(cmW, watch.Modified); err != nil {
			return nil, nil, 0, err
		}
		if err := nextEvent(sW, watch.Modified); err != nil {
			return nil, nil, 0, err
		}
		if err := waitDeployment(dW, changed); err != nil {
			return nil, nil, 0, err
		}
		lat = append(lat, time.Since(t0))
		// Let the pair settle (without coalescing, a second rollout follows) before the next.
		time.Sleep(coalesceDefault + 300*time.Millisecond)
		for len(dW.ResultChan()) > 0 {
			if ev := <-dW.ResultChan(); ev.Object != nil {
				if d, ok := ev.Object.(*appsv1.Deployment); ok {
					changed(d)
				}
			}
		}
	}
	return gaps, lat, int(p.metric(`configwave_wave_reconciles_total{result="rolled"}`) - before), nil
}
