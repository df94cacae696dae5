package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/installkey"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rollout"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
)

// wave SIGKILLed at random points across 60 changes: afterwards every workload carries the
// hash of its current config, no change is lost, and no workload rolled more often than its
// config changed.
func TestKilledAtRandomPointsConvergesWithoutDoubleRollouts(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	const workloads, changes = 10, 60
	for i := range workloads {
		createCM(t, client, ns, fmt.Sprintf("cm-%d", i), map[string]string{"a": "0"})
		d := deployment(ns, fmt.Sprintf("app-%d", i), withEnvKey(fmt.Sprintf("cm-%d", i), "a"))
		d.Spec.Replicas = new(int32)
		createDeployment(t, client, d)
	}
	p := startWave(t, ns)
	for i := range workloads {
		waitRecorded(t, client, ns, fmt.Sprintf("app-%d", i))
	}

	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	changed := map[int]int{}
	kills := 0
	// Registered before the processes' own cleanups, so it runs after them and its line ends
	// the output, which is the part CI keeps.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("summary: seed %d, %d kills, changes per workload %v, ReplicaSets per workload %v", seed, kills, changed, rsCounts(t, client, ns, workloads))
		}
	})
	for c := 1; c <= changes; c++ {
		i := rng.IntN(workloads)
		patchCM(t, client, ns, fmt.Sprintf("cm-%d", i), fmt.Sprintf(`{"data":{"a":"%d"}}`, c))
		changed[i]++
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
		if rng.IntN(6) == 0 {
			p.Kill()
			kills++
			p = startWave(t, ns)
		}
	}
	t.Logf("%d changes, %d kills", changes, kills)

	// Converged: each template carries Wave's hash of the config as it is now.
	for i := range workloads {
		if changed[i] == 0 {
			continue
		}
		require.Eventually(t, func() bool {
			return configValueRolled(t, client, ns, fmt.Sprintf("app-%d", i), "")
		}, eventually, tick, "app-%d does not carry the hash of its current config", i)
	}
	settle(t, p)
	for i := range workloads {
		name := fmt.Sprintf("app-%d", i)
		rss := replicaSets(t, client, ns, name) // waits until the Deployment controller caught up
		assert.LessOrEqual(t, len(rss), 1+changed[i], "%s rolled more often than its config changed (%d changes)", name, changed[i])
		if changed[i] > 0 {
			assert.GreaterOrEqual(t, len(rss), 2, "%s: a change was lost", name)
		}
	}
}

func rsCounts(t *testing.T, client kubernetes.Interface, ns string, workloads int) map[int]int {
	out := map[int]int{}
	for i := range workloads {
		d, err := client.AppsV1().Deployments(ns).Get(context.Background(), fmt.Sprintf("app-%d", i), metav1.GetOptions{})
		if err != nil {
			continue
		}
		rss, err := testcluster.ReplicaSets(context.Background(), client, d)
		if err == nil {
			out[i] = len(rss)
		}
	}
	return out
}

// etcd stopped for 3 s and started again while changes keep coming: wave never exits, and
// the workload ends on the config the API holds.
func TestZZEtcdRestart(t *testing.T) {
	changesAcrossAnOutage(t, func() {
		cluster.StopEtcd()
		time.Sleep(3 * time.Second)
		require.NoError(t, cluster.StartEtcd(ctx(t)))
	})
}

// changesAcrossAnOutage patches a ConfigMap every 300 ms before, during and after outage: the
// Deployment must end with Wave's hash of the value the API holds at the end, no more
// rollouts than accepted changes, and wave must never exit.
func changesAcrossAnOutage(t *testing.T, outage func()) *testcluster.Process {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cm", map[string]string{"a": "0"})
	// A change every 300 ms is a machine's: without --flapping-threshold=0 the brake would hold
	// the last one for a minute, which is not what this test is about.
	p := startWave(t, ns, "--flapping-threshold=0")
	createDeployment(t, client, deployment(ns, "app", withEnvKey("cm", "a"))) // one pod, run by kwok
	waitRecorded(t, client, ns, "app")

	tried, accepted := testcluster.ChangesAcross(t, client, 300*time.Millisecond, func(c context.Context, n int) error {
		_, err := client.CoreV1().ConfigMaps(ns).Patch(c, "cm", types.MergePatchType, []byte(fmt.Sprintf(`{"data":{"a":"%d"}}`, n)), metav1.PatchOptions{})
		return err
	}, outage)

	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx(t), "cm", metav1.GetOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return configValueRolled(t, client, ns, "app", cm.Data["a"]) }, eventually, tick,
		"the Deployment must carry the hash of the config the API holds (a=%s)", cm.Data["a"])
	settle(t, p)
	rss := replicaSets(t, client, ns, "app")
	assert.LessOrEqual(t, len(rss), 1+accepted+1, "more rollouts than changes") // +1: a change that timed out may still have been stored
	t.Logf("%d changes tried, %d accepted by the API, %d ReplicaSets", tried, accepted, len(rss))
	assert.False(t, p.Exited(), "wave survives the outage")
	return p
}

// A workload that references 200 ConfigMaps: recorded, and one change among them rolls it once.
func TestWorkloadReferencing200Objects(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	const n = 200
	var mods []func(*corev1.PodSpec)
	for i := range n {
		createCM(t, client, ns, fmt.Sprintf("cm-%03d", i), map[string]string{"a": "1"})
	}
	mods = append(mods, func(s *corev1.PodSpec) {
		for i := range n {
			s.Containers[0].Env = append(s.Containers[0].Env, corev1.EnvVar{Name: fmt.Sprintf("V%03d", i), ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref(fmt.Sprintf("cm-%03d", i)), Key: "a"}}})
		}
	})
	p := startWave(t, ns)
	createDeployment(t, client, deployment(ns, "app", mods...))
	before := waitRecorded(t, client, ns, "app")
	_, entries := confighash.SplitKeyID(before.Annotations[rollout.InputsAnnotation])
	assert.Len(t, strings.Split(entries, ","), n)
	patchCM(t, client, ns, "cm-137", `{"data":{"a":"2"}}`)
	waitTemplateHashChange(t, client, ns, "app", inputsHash(before))
	settle(t, p)
	assert.Len(t, replicaSets(t, client, ns, "app"), 2)
	require.Eventually(t, func() bool { return len(events(t, client, ns, "app", "ConfigChanged")) > 0 }, eventually, tick)
	assert.Contains(t, events(t, client, ns, "app", "ConfigChanged")[0].Message, "configmap/cm-137 changed")
}

// Watch expiry: etcd compacts every second; wave's informers come back from an API server
// restart with 410 Gone, relist, and the next change still rolls the workload.
func TestWatchExpiryRelists(t *testing.T) {
	testcluster.Need(t, cluster)
	c := testcluster.ForTestWith(t, testcluster.Options{EtcdArgs: []string{"--auto-compaction-mode=periodic", "--auto-compaction-retention=1s"}})
	client, err := kubernetes.NewForConfig(c.Config())
	require.NoError(t, err)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	createCM(t, client, ns, "noise", map[string]string{"a": "1"})
	p := startWave(t, ns, "--kubeconfig="+c.Kubeconfig(), "--v=5")
	createDeployment(t, client, deployment(ns, "app", withEnvKey("cm", "a")))
	before := waitRecorded(t, client, ns, "app")
	settle(t, p)

	for i := range 30 { // revisions wave's ConfigMap watch sees, but its Deployment watch does not
		patchCM(t, client, ns, "noise", fmt.Sprintf(`{"data":{"a":"n%d"}}`, i))
	}
	time.Sleep(2 * time.Second)
	c.StopAPIServer()
	require.NoError(t, c.StartAPIServer(ctx(t)))
	require.Eventually(t, func() bool {
		_, err := client.CoreV1().ConfigMaps(ns).Patch(ctx(t), "cm", types.MergePatchType, []byte(`{"data":{"a":"2"}}`), metav1.PatchOptions{})
		return err == nil
	}, eventually, 100*time.Millisecond)
	waitTemplateHashChange(t, client, ns, "app", inputsHash(before))
	assert.Contains(t, p.Log(), "too old resource version", "a watch must have come back with 410 Gone")
	assert.GreaterOrEqual(t, p.Metric(`configwave_wave_watch_restarts_total{resource="deployments"}`), float64(1), "the re-opened watch is counted")
	assert.False(t, p.Exited())
}

// Two replicas; the leader is SIGKILLed in the middle of a burst of changes, so some of them
// reach it and some arrive while nobody leads. The standby takes the Lease once it expires and
// every change is applied exactly once: no workload rolls twice for one change, none is lost.
func TestLeaderKilledMidBurst(t *testing.T) {
	t.Run("SIGKILL", func(t *testing.T) { leaderGoesMidBurst(t, (*testcluster.Process).Kill) })
	// A graceful stop: the leader stops its workers, waits for the items in flight, and only
	// then releases the Lease, so the standby takes over without waiting for it to expire and
	// no change is applied twice.
	t.Run("SIGTERM", func(t *testing.T) {
		leaderGoesMidBurst(t, func(p *testcluster.Process) {
			require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
			assert.Equal(t, 0, p.Wait(t, 30*time.Second), "a clean exit")
			assert.Contains(t, p.Log(), "leadership ended")
		})
	})
}

func leaderGoesMidBurst(t *testing.T, stop func(*testcluster.Process)) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	const workloads = 6
	for i := range workloads {
		createCM(t, client, ns, fmt.Sprintf("cm-%d", i), map[string]string{"a": "0"})
		d := deployment(ns, fmt.Sprintf("app-%d", i), withEnvKey(fmt.Sprintf("cm-%d", i), "a"))
		d.Spec.Replicas = new(int32)
		createDeployment(t, client, d)
	}
	const lease = 3 * time.Second
	le := []string{"--leader-election", "--leader-election-namespace=" + ns, "--leader-election-lease-duration=" + lease.String(),
		"--leader-election-renew-deadline=2s", "--leader-election-retry-period=500ms"}
	leader := startWave(t, ns, le...)
	require.Eventually(t, func() bool { return strings.Contains(leader.Log(), "became the leader") }, eventually, tick)
	standby := startWave(t, ns, le...)
	before := make([]string, workloads)
	for i := range workloads {
		before[i] = inputsHash(waitRecorded(t, client, ns, fmt.Sprintf("app-%d", i)))
	}

	// The burst: app-0 changes twice (once before the leader goes, once after), every other app
	// once; the leader goes after the third change, with changes still coming.
	changes := map[int]int{}
	order := []int{0, 1, 2, 3, 4, 5, 0}
	var stoppedAt time.Time
	for n, i := range order {
		patchCM(t, client, ns, fmt.Sprintf("cm-%d", i), fmt.Sprintf(`{"data":{"a":"%d"}}`, n+1))
		changes[i]++
		if n == 2 {
			// app-0's first change must be applied before its second, or the two may
			// legitimately merge into one rollout.
			waitTemplateHashChange(t, client, ns, "app-0", before[0])
			stoppedAt = time.Now()
			stop(leader)
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return strings.Contains(standby.Log(), "became the leader") }, eventually, tick)
	takeover := time.Since(stoppedAt)
	t.Logf("standby led %s after the leader went (lease %s)", takeover.Round(10*time.Millisecond), lease)
	assert.Less(t, takeover, 2*lease, "the standby waits for the lease to expire at most, not much longer")

	for i := range workloads {
		name := fmt.Sprintf("app-%d", i)
		want := fmt.Sprintf("%d", lastChange(order, i)+1)
		require.Eventually(t, func() bool {
			return configValueRolled(t, client, ns, name, want)
		}, eventually, tick, "%s does not carry its last change", name)
	}
	settle(t, standby)
	for i := range workloads {
		name := fmt.Sprintf("app-%d", i)
		assert.Len(t, replicaSets(t, client, ns, name), 1+changes[i], "%s: %d changes must give exactly %d rollouts", name, changes[i], changes[i])
	}
}

func lastChange(order []int, i int) int {
	last := -1
	for n, j := range order {
		if j == i {
			last = n
		}
	}
	return last
}

// configValueRolled reports whether the Deployment's template carries Wave's hash of its
// ConfigMap as it is now, and (unless want is empty) the ConfigMap's key "a" holds want.
func configValueRolled(t *testing.T, client kubernetes.Interface, ns, name, want string) bool {
	d := getDeployment(t, client, ns, name)
	used := podrefs.Extract(ns, d.Annotations, &d.Spec.Template.Spec)
	var value string
	hashes := waveHashesOf(t, client, used.Wave, func(r configref.Ref) (any, error) {
		cm, err := client.CoreV1().ConfigMaps(r.Namespace).Get(ctx(t), r.Name, metav1.GetOptions{})
		if err == nil {
			value = cm.Data["a"]
		}
		return cm, err
	})
	return (want == "" || value == want) && slices.Contains(hashes, d.Spec.Template.Annotations[podrefs.ConfigHashAnnotation])
}

// waveHashesOf is Wave's own hash of what uses names, and the same keyed under the install
// key wave made in its namespace: the hash of a workload that had none when wave first saw it.
func waveHashesOf(t *testing.T, client kubernetes.Interface, uses podrefs.Uses, get confighash.GetFunc) []string {
	t.Helper()
	plain, err := confighash.WaveHash(confighash.HashWave, uses, get)
	require.NoError(t, err)
	out := []string{plain}
	if s, err := client.CoreV1().Secrets(configref.DefaultNamespace()).Get(ctx(t), "configwave-install-key", metav1.GetOptions{}); err == nil {
		keyed, err := confighash.KeyedWaveHash(confighash.HashWave, s.Data[installkey.DataKey], uses, get)
		require.NoError(t, err)
		out = append(out, keyed)
	}
	return out
}

// A ConfigMap deleted while a Deployment uses it: an Event, and no rollout (new pods could not
// start without it); recreated with the same data, nothing rolls; a real change then rolls once.
func TestConfigMapDeletedWhileInUse(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	p := startWave(t, ns)
	createDeployment(t, client, deployment(ns, "app", withEnvKey("cm", "a")))
	before := waitRecorded(t, client, ns, "app")

	require.NoError(t, client.CoreV1().ConfigMaps(ns).Delete(ctx(t), "cm", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return len(events(t, client, ns, "app", "ConfigMissing")) > 0 }, eventually, tick)
	settle(t, p)
	// The rollout record notes what is missing (a metadata write); the pod template stays.
	assert.Equal(t, before.Spec.Template, getDeployment(t, client, ns, "app").Spec.Template, "no rollout while the ConfigMap is gone")
	rec, err := rolloutrecord.ParseRecord(getDeployment(t, client, ns, "app").Annotations[rolloutrecord.Annotation])
	require.NoError(t, err)
	assert.Equal(t, "configmap/cm", rec.Missing)

	unchanged := p.Metric(`configwave_wave_reconciles_total{result="unchanged"}`)
	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	waitUnchangedAbove(t, p, unchanged) // wave saw it back, and found the recorded inputs again
	settle(t, p)
	assert.Equal(t, before.Spec.Template, getDeployment(t, client, ns, "app").Spec.Template, "the same data back: the pods already run it")
	require.Eventually(t, func() bool {
		return getDeployment(t, client, ns, "app").Annotations[rolloutrecord.Annotation] == ""
	}, eventually, tick, "nothing missing any more, nothing rolled: the record goes")
	assert.Len(t, replicaSets(t, client, ns, "app"), 1)

	patchCM(t, client, ns, "cm", `{"data":{"a":"2"}}`)
	waitTemplateHashChange(t, client, ns, "app", inputsHash(before))
	settle(t, p)
	assert.Len(t, replicaSets(t, client, ns, "app"), 2)
	assert.False(t, p.Exited())
}
