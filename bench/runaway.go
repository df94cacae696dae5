package main

import (
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// Runaway is issue 12's brake on a runaway writer (wave-k8s/wave#182: 6,000 ReplicaSets): a
// ConfigMap rewritten 100 times a second, against a floor between rollouts.
type Runaway struct {
	Writes      int     `json:"writes"`
	Seconds     float64 `json:"seconds"`  // the writes took
	FloorS      float64 `json:"floor_s"`  // --min-rollout-interval
	Rollouts    int     `json:"rollouts"` // new ReplicaSets
	Bound       int     `json:"bound"`    // one per floor, from the first write to a floor after the last
	FinalRolled bool    `json:"final_rolled"`
	// FinalAfterS: last write answered → the template carries Wave's hash of the last write.
	FinalAfterS float64 `json:"final_after_s"`
}

func waveRunaway(e *env, r *report) error {
	ns, err := e.namespace("runaway")
	if err != nil {
		return err
	}
	if err := e.createConfigMap(ns, "cm-0", map[string]string{"a": "0"}); err != nil {
		return err
	}
	if err := e.deployments(ns, 1, func(int) string { return "cm-0" }); err != nil {
		return err
	}
	floor := 10 * time.Second
	// Unkeyed (--install-key-secret=""), so that the template's hash is Wave's own and the last
	// write's rollout can be checked against it.
	p, err := start(e.wave, nil, "--kubeconfig="+e.cluster.Kubeconfig(), "--namespaces="+ns, "--min-rollout-interval="+floor.String(), "--install-key-secret=")
	if err != nil {
		return err
	}
	defer p.stop()
	if err := p.waitReady(time.Minute); err != nil {
		return err
	}
	if err := waitBaselines(e, p, 1); err != nil {
		return err
	}
	run := Runaway{Writes: e.reps(1000, 6000), FloorS: floor.Seconds()}
	// Rollouts are counted as wave's writes of a new template, seen on a watch: ReplicaSets
	// would undercount when kube-controller-manager, busy with earlier steps, sees only the
	// latest of several templates.
	dw, err := e.client.AppsV1().Deployments(ns).Watch(e.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "app-0").String()})
	if err != nil {
		return err
	}
	defer dw.Stop()
	var mu sync.Mutex
	templates := map[string]bool{}
	go func() {
		for ev := range dw.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok {
				mu.Lock()
				templates[d.Spec.Template.Annotations[rollout.InputsHashAnnotation]] = true
				mu.Unlock()
			}
		}
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	start := time.Now()
	for i := 1; i <= run.Writes; i++ {
		<-tick.C
		if err := e.patchConfigMap(ns, "cm-0", "a", strconv.Itoa(i)); err != nil {
			tick.Stop()
			return err
		}
	}
	tick.Stop()
	took := time.Since(start)
	last := time.Now()
	run.Seconds = took.Seconds()
	run.Bound = 2 + int(took/floor)

	d, err := e.client.AppsV1().Deployments(ns).Get(e.ctx, "app-0", metav1.GetOptions{})
	if err != nil {
		return err
	}
	cm, err := e.client.CoreV1().ConfigMaps(ns).Get(e.ctx, "cm-0", metav1.GetOptions{})
	if err != nil {
		return err
	}
	want, err := confighash.KeyedWaveHash(confighash.HashWave, nil, podrefs.Extract(ns, d.Annotations, &d.Spec.Template.Spec).Wave,
		func(configref.Ref) (any, error) { return cm, nil })
	if err != nil {
		return err
	}
	err = waitFor(e.ctx, 2*floor+time.Minute, func() bool {
		d, err := e.client.AppsV1().Deployments(ns).Get(e.ctx, "app-0", metav1.GetOptions{})
		return err == nil && d.Spec.Template.Annotations[podrefs.ConfigHashAnnotation] == want
	})
	run.FinalRolled = err == nil
	run.FinalAfterS = time.Since(last).Seconds()
	time.Sleep(time.Second) // the watch delivers the last template
	mu.Lock()
	delete(templates, "") // the template before wave's first rollout
	run.Rollouts = len(templates)
	mu.Unlock()
	r.Runaway = &run
	return nil
}
