package rollout

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/rolloutwatch"
	"github.com/configwave/configwave/internal/wave/workload"

	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

// Each change of verdict the leader sees gives one Event, one count and, for a failure and the
// recovery after it, one alert; what it finds on first sight gives none, so a failover never
// repeats them, but a failure found so is listed at /status all the same.
func TestFollowUpReportsChangesOfVerdict(t *testing.T) {
	client := fake.NewSimpleClientset()
	rec := record.NewFakeRecorder(20)
	var alerts []string
	c, err := NewController(Config{Client: waveclienttest.Wrap(client), Informers: NewInformers(workload.Clients{Kube: waveclienttest.Wrap(client)}, workload.Builtin(), []string{"ns"}, labels.Everything(), time.Minute, confighash.Digester{}),
		Recorder: rec, Metrics: testMetrics(),
		RolloutDeadline: time.Minute, Alert: func(s string) { alerts = append(alerts, s) }})
	require.NoError(t, err)
	started := time.Now().Add(-5 * time.Second)
	dep := func(name string, r rolloutrecord.Record, done bool, failed string) workload.Workload {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Generation: 2,
			Annotations: map[string]string{rolloutrecord.Annotation: r.String()}}}
		d.Spec.ProgressDeadlineSeconds = new(int32)
		d.Status.ObservedGeneration = 2
		if done {
			d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas = 1, 1, 1
		}
		if failed != "" {
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: failed}}
		}
		w, _ := workload.Of(d)
		return w
	}
	events := func() []string {
		var out []string
		for {
			select {
			case e := <-rec.Events:
				out = append(out, e)
			default:
				return out
			}
		}
	}
	r := rolloutrecord.Record{Change: "configmap/app", Started: started}

	c.followUp(context.Background(), dep("app", r, false, "")) // first sight, rolling
	assert.Empty(t, events())
	c.followUp(context.Background(), dep("app", r, false, "")) // no change
	c.followUp(context.Background(), dep("app", r, true, ""))
	ev := events()
	require.Len(t, ev, 1)
	assert.Regexp(t, `^Normal ConfigRolledOut the configmap/app change is rolled out: every pod runs the current config \(5(\.\d)?s after wave started the rollout\)$`, ev[0])

	r = rolloutrecord.Record{Change: "configmap/app", Started: started.Add(time.Second)}
	c.follow.Started("Deployment/ns/app", r) // this replica wrote the next rollout
	stuck := `ReplicaSet "app-7c9" has timed out progressing.`
	c.followUp(context.Background(), dep("app", r, false, stuck))
	ev = events()
	require.Len(t, ev, 1)
	assert.Equal(t, `Warning ConfigRolloutFailed the rollout of the configmap/app change failed: ReplicaSet "app-7c9" has timed out progressing.; the old pods keep serving. Revert the change, or fix the config: the next change rolls again`, ev[0])
	require.Len(t, alerts, 1)
	assert.Contains(t, alerts[0], "deployment ns/app")
	assert.Contains(t, alerts[0], "configmap/app")
	assert.Equal(t, []rolloutwatch.FailedRollout{{Workload: "deployment ns/app", Change: "configmap/app", Reason: stuck}}, c.follow.FailedRollouts())
	c.followUp(context.Background(), dep("app", r, false, stuck))
	assert.Empty(t, events(), "a failure is reported once")

	fixing := dep("app", r, false, "")
	fixing.Meta.Generation = 3 // fixed by hand: a new template, not seen yet
	c.followUp(context.Background(), fixing)
	assert.Empty(t, events())
	c.followUp(context.Background(), dep("app", r, true, "")) // fixed
	ev = events()
	require.Len(t, ev, 1)
	assert.True(t, strings.HasPrefix(ev[0], "Normal ConfigRolledOut"))
	require.Len(t, alerts, 2)
	assert.Contains(t, alerts[1], "recovered")
	assert.Empty(t, c.follow.FailedRollouts())

	c.followUp(context.Background(), dep("other", r, false, stuck)) // a new leader finds it failed
	assert.Empty(t, events())
	assert.Len(t, alerts, 2)
	assert.Len(t, c.follow.FailedRollouts(), 1, "listed at /status all the same")

	// Someone changes the image of an up-to-date workload: its pods roll, and even fail, but no
	// config rollout is under way, so wave says nothing.
	c.followUp(context.Background(), dep("image", r, true, ""))
	c.followUp(context.Background(), dep("image", r, false, ""))
	c.followUp(context.Background(), dep("image", r, false, stuck))
	c.followUp(context.Background(), dep("image", r, true, ""))
	assert.Empty(t, events())
	assert.Len(t, c.follow.FailedRollouts(), 1, "only the workload found failed before")

	// A Deployment's generation moves with its metadata: until its controller looked, nothing
	// is judged, so a note in the rollout record does not look like a new rollout.
	unobserved := dep("app", r, true, "")
	unobserved.Progress.Observed = false
	unobserved.Progress.Done = false
	c.followUp(context.Background(), unobserved)
	c.followUp(context.Background(), dep("app", r, true, ""))
	assert.Empty(t, events())

	assert.Equal(t, 2.0, testutil.ToFloat64(c.Metrics.Rollouts.WithLabelValues(RolloutSucceeded)))
	assert.Equal(t, 1.0, testutil.ToFloat64(c.Metrics.Rollouts.WithLabelValues(RolloutFailed)))
}

// A StatefulSet has no deadline of its own: wave looks again when --rollout-deadline passes.
func TestFollowUpLooksAgainAtWavesDeadline(t *testing.T) {
	client := fake.NewSimpleClientset()
	const deadline = time.Hour
	c, err := NewController(Config{Client: waveclienttest.Wrap(client), Informers: NewInformers(workload.Clients{Kube: waveclienttest.Wrap(client)}, workload.Builtin(), []string{"ns"}, labels.Everything(), time.Minute, confighash.Digester{}),
		Recorder: record.NewFakeRecorder(20), Metrics: testMetrics(),
		RolloutDeadline: deadline})
	require.NoError(t, err)
	// The look put off is read from the queue, not waited for: a deadline short enough to wait
	// for could pass, on a slow machine, before followUp looked, and no look would be put off.
	later := &laterQueue{TypedDelayingInterface: workqueue.NewTypedDelayingQueue[string](), after: map[string]time.Duration{}}
	c.queue.ShutDown()
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{DelayingQueue: later})
	t.Cleanup(c.queue.ShutDown)
	started := time.Now().Round(0) // the wall clock, as the record keeps it
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", Generation: 2,
		Annotations: map[string]string{rolloutrecord.Annotation: rolloutrecord.Record{Change: "secret/db", Started: started}.String()}},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 2}}
	w, _ := workload.Of(s)
	c.followUp(context.Background(), w)
	looked := time.Since(started)
	assert.Zero(t, c.queue.Len(), "not due yet")
	d, ok := later.delay("StatefulSet/ns/db")
	require.True(t, ok, "a look is put off")
	assert.LessOrEqual(t, d, deadline+100*time.Millisecond, "not after the deadline (and a moment)")
	assert.GreaterOrEqual(t, d, deadline-looked, "not before the deadline")
}

// laterQueue notes for how long each key was put off.
type laterQueue struct {
	workqueue.TypedDelayingInterface[string]
	mu    sync.Mutex
	after map[string]time.Duration
}

func (q *laterQueue) AddAfter(key string, d time.Duration) {
	q.mu.Lock()
	q.after[key] = d
	q.mu.Unlock()
	q.TypedDelayingInterface.AddAfter(key, d)
}

func (q *laterQueue) delay(key string) (time.Duration, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	d, ok := q.after[key]
	return d, ok
}
