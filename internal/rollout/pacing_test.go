package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/outcome"
	"github.com/configwave/configwave/internal/workload"
)

func TestPacerHolds(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	w := func(annotations map[string]string) workload.Workload {
		v, _ := workload.Of(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", Annotations: annotations}})
		return v
	}
	rolledAt := func(at time.Time) outcome.Record { return outcome.Record{Change: "configmap/a", Started: at} }

	p := newPacer(200*time.Millisecond, 0, StakaterPausePeriod)
	d, why := p.hold(w(nil), outcome.Record{}, t0)
	assert.Equal(t, 200*time.Millisecond, d, "the first change of a quiet workload waits for the others")
	assert.Contains(t, why, "--coalesce")
	d, _ = p.hold(w(nil), outcome.Record{}, t0.Add(50*time.Millisecond))
	assert.Equal(t, 150*time.Millisecond, d, "a later change does not push the wait out")
	d, _ = p.hold(w(nil), outcome.Record{}, t0.Add(200*time.Millisecond))
	assert.Zero(t, d)
	assert.Equal(t, 1.0, p.Held())
	p.rolled("Deployment/ns/app")
	assert.Zero(t, p.Held())

	p = newPacer(0, time.Minute, StakaterPausePeriod)
	d, why = p.hold(w(nil), rolledAt(t0), t0.Add(20*time.Second))
	assert.Equal(t, 40*time.Second, d, "the floor from the last rollout")
	assert.Contains(t, why, "--min-rollout-interval")
	d, _ = p.hold(w(nil), outcome.Record{}, t0)
	assert.Zero(t, d, "never rolled by wave: no floor")

	d, why = p.hold(w(map[string]string{MinRolloutIntervalAnnotation: "5m"}), rolledAt(t0), t0.Add(time.Minute))
	assert.Equal(t, 4*time.Minute, d, "the workload's own floor raises it")
	assert.Contains(t, why, MinRolloutIntervalAnnotation)
	d, why = p.hold(w(map[string]string{StakaterPausePeriod: "10m", MinRolloutIntervalAnnotation: "5m"}), rolledAt(t0), t0.Add(time.Minute))
	assert.Equal(t, 9*time.Minute, d, "the longest applies")
	assert.Contains(t, why, StakaterPausePeriod)
	d, _ = p.hold(w(map[string]string{MinRolloutIntervalAnnotation: "10s"}), rolledAt(t0), t0.Add(20*time.Second))
	assert.Equal(t, 40*time.Second, d, "never below --min-rollout-interval")
}

func TestParseInterval(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 0, "30s": 30 * time.Second, " 5m ": 5 * time.Minute, "24h": 24 * time.Hour} {
		got, err := ParseInterval(v)
		require.NoError(t, err, v)
		assert.Equal(t, want, got, v)
	}
	for _, v := range []string{"5", "-1m", "0s", "25h", "soon"} {
		_, err := ParseInterval(v)
		assert.Error(t, err, v)
	}
}

func TestPacerClusterWideRate(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	w := func(name string) workload.Workload {
		v, _ := workload.Of(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}})
		return v
	}
	p := newPacer(0, 0, StakaterPausePeriod)
	p.limitRate(2, 1) // one rollout every 500 ms
	var waits []time.Duration
	for _, name := range []string{"a", "b", "c"} {
		d, why := p.hold(w(name), outcome.Record{}, t0)
		waits = append(waits, d)
		if d > 0 {
			assert.Contains(t, why, "--update-rate=2")
		}
	}
	assert.Equal(t, []time.Duration{0, 500 * time.Millisecond, time.Second}, waits, "first come, first served")
	d, _ := p.hold(w("c"), outcome.Record{}, t0.Add(400*time.Millisecond))
	assert.Equal(t, 600*time.Millisecond, d, "a workload looked at again keeps its turn, not a new one")
	d, _ = p.hold(w("b"), outcome.Record{}, t0.Add(500*time.Millisecond))
	assert.Zero(t, d, "its turn has come")
	p.rolled("Deployment/ns/b")
	assert.Equal(t, 2.0, p.Held(), "a and c still wait to be marked rolled")

	p = newPacer(0, 0, StakaterPausePeriod)
	p.limitRate(0, 1)
	for i := range 100 {
		d, _ := p.hold(w(string(rune('a'+i%26))+"x"), outcome.Record{}, t0)
		require.Zero(t, d, "no limit by default")
	}
}
