package main

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcerts"
	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/pacing"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/window"
	"github.com/configwave/configwave/internal/wave/workload"
)

// A ConfigMap and a Secret patched 50 ms apart (one kubectl apply) roll the workload once
// (--coalesce, default 200ms); with --coalesce=0 the same pair rolls it twice.
func TestChangesTogetherRollOnce(t *testing.T) {
	client := adminClient(t)
	for _, tc := range []struct {
		name  string
		args  []string
		rolls int
	}{
		{"default --coalesce", nil, 1},
		{"--coalesce=0", []string{"--coalesce=0"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := testcluster.Namespace(t, client)
			createCM(t, client, ns, "cm", map[string]string{"a": "1"})
			createSecret(t, client, ns, "sec", map[string]string{"p": "1"})
			createDeployment(t, client, deployment(ns, "app", withEnvKey("cm", "a"), func(s *corev1.PodSpec) {
				s.Containers[0].EnvFrom = append(s.Containers[0].EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("sec")}})
			}))
			p := startWave(t, ns, tc.args...)
			before := waitRecorded(t, client, ns, "app")
			settle(t, p)

			patchCM(t, client, ns, "cm", `{"data":{"a":"2"}}`)
			time.Sleep(50 * time.Millisecond)
			patchSecret(t, client, ns, "sec", `{"stringData":{"p":"2"}}`)
			waitTemplateHashChange(t, client, ns, "app", inputsHash(before))
			settle(t, p)
			assert.Len(t, replicaSets(t, client, ns, "app"), 1+tc.rolls)
			assert.Equal(t, float64(tc.rolls), p.Metric(`configwave_wave_reconciles_total{result="rolled"}`))
		})
	}
}

// A floor between rollouts: the first change rolls at once; changes within the floor are held
// and roll together, once, when it ends, with the last content. Stakater Reloader's
// pause-period, as Reloader applies it: the first change pauses, and every change within the
// period rolls once, at its end.
func TestFloorBetweenRollouts(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cm", map[string]string{"a": "0"})
	own := deployment(ns, "own", withEnvKey("cm", "a"))
	own.Annotations[pacing.MinRolloutIntervalAnnotation] = "4s"
	createDeployment(t, client, own)
	createDeployment(t, client, stakaterDeployment(ns, "paused", map[string]string{podrefs.StakaterAuto: "true", pacing.StakaterPausePeriod: "4s"}, withEnvFrom("cm")))
	p := startWave(t, ns, "--coalesce=0")
	names := []string{"own", "paused"}
	before := map[string]string{}
	for _, name := range names {
		before[name] = inputsHash(waitRecorded(t, client, ns, name))
	}
	settle(t, p)

	patchCM(t, client, ns, "cm", `{"data":{"a":"1"}}`)
	before["own"] = inputsHash(waitTemplateHashChange(t, client, ns, "own", before["own"]))
	for i := 2; i <= 4; i++ { // a runaway writer
		time.Sleep(300 * time.Millisecond)
		patchCM(t, client, ns, "cm", `{"data":{"a":"`+string(rune('0'+i))+`"}}`)
	}
	require.Eventually(t, func() bool { return p.Metric("configwave_wave_rollouts_held") == 2 }, eventually, tick, "both held")
	for _, name := range names {
		assert.Equal(t, before[name], inputsHash(getDeployment(t, client, ns, name)), "%s: no rollout within the floor or the pause", name)
	}
	for _, name := range names {
		waitTemplateHashChange(t, client, ns, name, before[name])
	}
	settle(t, p)
	assert.Len(t, replicaSets(t, client, ns, "own"), 3, "own floor: one rollout at the change, one when the floor ended")
	assert.Len(t, replicaSets(t, client, ns, "paused"), 2, "Reloader's pause-period: one rollout, at the end of the pause")
	assert.True(t, configValueRolled(t, client, ns, "own", "4"), "the held changes are not lost: the last content rolled")
}

// A runaway writer (100 writes a second) against a floor between rollouts: at most one rollout
// per floor, and the last write rolls in the end.
func TestRunawayWriterRollsOncePerFloor(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cm", map[string]string{"a": "0"})
	createDeployment(t, client, deployment(ns, "app", withEnvKey("cm", "a")))
	p := startWave(t, ns, "--min-rollout-interval=2s", "--flapping-threshold=0") // the floor alone: a brake would hold the last write a minute
	waitRecorded(t, client, ns, "app")
	settle(t, p)

	const writes, every, floor = 500, 10 * time.Millisecond, 2 * time.Second
	start := time.Now()
	tick := time.NewTicker(every)
	for i := 1; i <= writes; i++ {
		<-tick.C
		patchCM(t, client, ns, "cm", fmt.Sprintf(`{"data":{"a":"%d"}}`, i))
	}
	tick.Stop()
	took := time.Since(start)
	require.Eventually(t, func() bool { return configValueRolled(t, client, ns, "app", fmt.Sprint(writes)) }, 3*floor+eventually, 100*time.Millisecond, "the last write rolls")
	settle(t, p)
	// Rollouts are at least a floor apart, from the first write to a floor after the last.
	most := 2 + int((took+500*time.Millisecond)/floor) // 500 ms for the rollouts themselves
	got := len(replicaSets(t, client, ns, "app")) - 1
	t.Logf("%d writes in %s: %d rollouts (at most %d)", writes, took.Round(time.Millisecond), got, most)
	assert.LessOrEqual(t, got, most)
	assert.GreaterOrEqual(t, got, 2, "the floor held changes back, it did not drop them")
}

// --update-rate (Wave's flag) spaces rollouts across the cluster: five workloads on one
// ConfigMap roll in turn, 500 ms apart at 2 a second, and every one of them rolls.
func TestUpdateRateSpacesRolloutsAcrossTheCluster(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "shared", map[string]string{"a": "1"})
	names := []string{"w0", "w1", "w2", "w3", "w4"}
	for _, name := range names {
		createDeployment(t, client, deployment(ns, name, withEnvKey("shared", "a")))
	}
	p := startWave(t, ns, "--coalesce=0", "--update-rate=2", "--update-burst=1")
	before := map[string]string{}
	for _, name := range names {
		before[name] = inputsHash(waitRecorded(t, client, ns, name))
	}
	settle(t, p)

	patchCM(t, client, ns, "shared", `{"data":{"a":"2"}}`)
	var started []time.Time
	for _, name := range names {
		d := waitTemplateHashChange(t, client, ns, name, before[name])
		rec, err := rolloutrecord.ParseRecord(d.Annotations[rolloutrecord.Annotation])
		require.NoError(t, err)
		started = append(started, rec.Started)
	}
	settle(t, p)
	sort.Slice(started, func(i, j int) bool { return started[i].Before(started[j]) })
	spread := started[len(started)-1].Sub(started[0])
	t.Logf("5 rollouts over %s", spread)
	assert.GreaterOrEqual(t, spread, 1900*time.Millisecond, "four turns of 500 ms between the first and the last")
	for _, name := range names {
		assert.Len(t, replicaSets(t, client, ns, name), 2, "%s rolled once", name)
	}
}

// A rollout window (--rollout-window, a workload's own annotation): a change outside it waits,
// says until when and rolls nothing; configwave.io/rollout-now rolls it at once, and wave
// removes the annotation; a window that does not parse is a Warning naming the field, and the
// flag's window applies.
func TestRolloutWindowDefersAndRolloutNowRolls(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cm", map[string]string{"a": "0"})
	// A window of one hour, twelve hours from now: closed for the whole test, on any machine.
	opens := time.Now().UTC().Add(12 * time.Hour)
	closed := fmt.Sprintf("%s %02d:%02d-%02d:%02d UTC", opens.Weekday().String()[:3], opens.Hour(), opens.Minute(), (opens.Hour()+1)%24, opens.Minute())
	d := deployment(ns, "web", withEnvKey("cm", "a"))
	createDeployment(t, client, d)
	bad := deployment(ns, "typo", withEnvKey("cm", "a"))
	bad.Annotations[window.Annotation] = "weekdays 9 to 5"
	createDeployment(t, client, bad)
	p := startWave(t, ns, "--coalesce=0", "--rollout-window="+closed)
	before := inputsHash(waitRecorded(t, client, ns, "web"))
	waitRecorded(t, client, ns, "typo")
	require.Eventually(t, func() bool { return len(events(t, client, ns, "typo", "InvalidAnnotation")) > 0 }, eventually, tick)
	assert.Contains(t, events(t, client, ns, "typo", "InvalidAnnotation")[0].Message, window.Annotation+`: window "weekdays 9 to 5"`)
	settle(t, p)

	patchCM(t, client, ns, "cm", `{"data":{"a":"1"}}`)
	require.Eventually(t, func() bool { return eventCount(t, client, ns, "web", "ConfigRolloutDeferred") == 1 }, eventually, tick, "the change is deferred")
	assert.Contains(t, events(t, client, ns, "web", "ConfigRolloutDeferred")[0].Message, "rolls when it opens, at ")
	assert.Equal(t, before, inputsHash(getDeployment(t, client, ns, "web")), "nothing rolled: the deferral is the decision")
	assert.Contains(t, getDeployment(t, client, ns, "web").Annotations[rolloutrecord.Annotation], `"deferredUntil"`)

	_, err := client.AppsV1().Deployments(ns).Patch(ctx(t), "web", types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"}}}`, window.NowAnnotation), metav1.PatchOptions{})
	require.NoError(t, err)
	waitTemplateHashChange(t, client, ns, "web", before)
	require.Eventually(t, func() bool {
		_, left := getDeployment(t, client, ns, "web").Annotations[window.NowAnnotation]
		return !left
	}, eventually, tick, "wave removes rollout-now with the rollout it asked for")
	assert.True(t, configValueRolled(t, client, ns, "web", "1"))
	assert.Equal(t, 1, eventCount(t, client, ns, "web", "ConfigRolloutDeferred"), "said once")
	// The workload whose window does not parse: --rollout-window (closed) applies to it.
	typoBefore := inputsHash(getDeployment(t, client, ns, "typo"))
	require.Eventually(t, func() bool { return eventCount(t, client, ns, "typo", "ConfigRolloutDeferred") == 1 }, eventually, tick, "the flag's window applies to the typo")
	assert.Equal(t, typoBefore, inputsHash(getDeployment(t, client, ns, "typo")))
}

// configwave.io/rollout-window on the namespace: every workload there without a window of its
// own rolls in it, a change outside it waits and says so; the namespace's window taken off,
// the change rolls at once (a change of the namespace is looked at, as a change of the
// workload is).
func TestNamespaceRolloutWindowDefers(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	opens := time.Now().UTC().Add(12 * time.Hour) // closed for the whole test, on any machine
	closed := fmt.Sprintf("%s %02d:%02d-%02d:%02d UTC", opens.Weekday().String()[:3], opens.Hour(), opens.Minute(), (opens.Hour()+1)%24, opens.Minute())
	_, err := client.CoreV1().Namespaces().Patch(ctx(t), ns, types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, window.Annotation, closed), metav1.PatchOptions{})
	require.NoError(t, err)
	createCM(t, client, ns, "cm", map[string]string{"a": "0"})
	createDeployment(t, client, deployment(ns, "web", withEnvKey("cm", "a")))
	p := startWave(t, ns, "--coalesce=0")
	before := inputsHash(waitRecorded(t, client, ns, "web"))
	settle(t, p)

	patchCM(t, client, ns, "cm", `{"data":{"a":"1"}}`)
	require.Eventually(t, func() bool { return eventCount(t, client, ns, "web", "ConfigRolloutDeferred") == 1 }, eventually, tick, "the namespace's window defers the change")
	assert.Equal(t, before, inputsHash(getDeployment(t, client, ns, "web")), "nothing rolled")

	_, err = client.CoreV1().Namespaces().Patch(ctx(t), ns, types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, window.Annotation), metav1.PatchOptions{})
	require.NoError(t, err)
	waitTemplateHashChange(t, client, ns, "web", before)
	assert.True(t, configValueRolled(t, client, ns, "web", "1"))
}

// A ConfigMap written in a loop (--flapping-threshold=3/20s): braked at its third change, with a
// ConfigFlapping Warning on it and on the workload, no rollout while it flaps, and once it is
// quiet for the threshold's duration the workload rolls once, with the last content.
func TestFlappingSourceIsBraked(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "cm", map[string]string{"a": "0"})
	createDeployment(t, client, deployment(ns, "web", withEnvKey("cm", "a")))
	p := startWave(t, ns, "--coalesce=0", "--flapping-threshold=3/20s")
	waitRecorded(t, client, ns, "web")
	settle(t, p)

	for i := 1; i <= 8; i++ { // a loop, one write after another
		patchCM(t, client, ns, "cm", `{"data":{"a":"`+fmt.Sprint(i)+`"}}`)
	}
	require.Eventually(t, func() bool { return eventCount(t, client, ns, "cm", "ConfigFlapping") == 1 }, eventually, tick, "said on the ConfigMap")
	require.Eventually(t, func() bool { return eventCount(t, client, ns, "web", "ConfigFlapping") == 1 }, eventually, tick, "said on the workload")
	d := getDeployment(t, client, ns, "web")
	rss, err := testcluster.ReplicaSets(ctx(t), client, d)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(rss), 3, "the first ReplicaSet, and at most the two changes before the brake")
	assert.False(t, configValueRolled(t, client, ns, "web", "8"), "braked: the last write has not rolled")

	// Quiet now: released after 20 s, one rollout with the last content.
	require.Eventually(t, func() bool { return configValueRolled(t, client, ns, "web", "8") }, 2*eventually, tick, "the last write rolls once the source is quiet")
	settle(t, p)
	rss, err = testcluster.ReplicaSets(ctx(t), client, getDeployment(t, client, ns, "web"))
	require.NoError(t, err)
	assert.LessOrEqual(t, len(rss), 4, "one rollout after the brake")
	assert.Equal(t, 1, eventCount(t, client, ns, "web", "ConfigFlapping"), "said once")
	assert.Equal(t, 0.0, p.Metric("configwave_wave_sources_braked"))
}

// A ConfigMap shared by four workloads under --max-rollouts-in-flight=1: never more than one
// rollout under way (sampled until all four rolled), those that wait say so once, and all four
// roll with the change.
func TestMaxRolloutsInFlight(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "shared", map[string]string{"a": "0"})
	names := []string{"a", "b", "c", "d"}
	for _, name := range names {
		createDeployment(t, client, deployment(ns, name, withEnvKey("shared", "a")))
	}
	p := startWave(t, ns, "--coalesce=0", "--max-rollouts-in-flight=1")
	before := map[string]string{}
	for _, name := range names {
		before[name] = inputsHash(waitRecorded(t, client, ns, name))
	}
	settle(t, p)

	patchCM(t, client, ns, "shared", `{"data":{"a":"1"}}`)
	maxRolling, rolled := 0, 0
	require.Eventually(t, func() bool {
		// One list: one consistent snapshot of the four.
		list, err := client.AppsV1().Deployments(ns).List(ctx(t), metav1.ListOptions{})
		if err != nil {
			return false
		}
		rolling := 0
		rolled = 0
		for i := range list.Items {
			d := &list.Items[i]
			if inputsHash(d) == before[d.Name] {
				continue
			}
			rolled++
			// Under way as wave judges it (its record and the Deployment's status), the judgement
			// the cap counts by; written and not yet seen by the Deployment controller counts too,
			// as wave counts a rollout from its write.
			w, _ := workload.Of(d)
			rec, err := rolloutrecord.ParseRecord(d.Annotations[rolloutrecord.Annotation])
			if err != nil {
				return false
			}
			if rolloutrecord.Evaluate(rec, w.Progress, time.Now(), 0).State == rolloutrecord.Rolling {
				rolling++
			}
		}
		maxRolling = max(maxRolling, rolling)
		return rolled == len(names) && rolling == 0
	}, 2*eventually, tick, "all four roll, one after another")
	assert.LessOrEqual(t, maxRolling, 1, "never more than one rollout under way")
	queued := 0
	for _, name := range names {
		n := eventCount(t, client, ns, name, "ConfigRolloutQueued")
		assert.LessOrEqual(t, n, 1, "%s said it waits once at most", name)
		queued += n
	}
	assert.Positive(t, queued, "the four were decided together: one rolled, and at least one waited and said so")
	for _, name := range names {
		assert.True(t, configValueRolled(t, client, ns, name, "1"), name)
	}
	assert.Equal(t, 0.0, p.Metric("configwave_wave_rollouts_queued"))
}

// eventCount is how many times an Event of reason was said about name, counting those the
// recorder folded into one (it raises the count of an Event said again).
func eventCount(t testing.TB, client kubernetes.Interface, ns, name, reason string) int {
	t.Helper()
	n := 0
	for _, e := range events(t, client, ns, name, reason) {
		n += max(int(e.Count), 1)
		if e.Series != nil {
			n += int(e.Series.Count) - 1
		}
	}
	return n
}

// A TLS Secret written in two steps, the new certificate first and its key a moment later (a
// renewal half-written, as a script or a second controller writes it): nothing rolls while the
// two are not a pair, a ConfigSourceIncomplete Warning says why, and once the key follows the
// workload rolls once, with the pair. Past --source-ready-timeout a pair that stays broken rolls
// all the same, and says so.
func TestIncompleteTLSSecretWaits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout string
		fixed   bool // the key follows
	}{
		{"the key follows: one rollout, with the pair", "1h", true},
		{"the pair stays broken: rolls after the timeout, saying so", "3s", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := adminClient(t)
			ns := testcluster.Namespace(t, client)
			crt1, key1 := testcerts.SelfSigned(t, "web")
			crt2, key2 := testcerts.SelfSigned(t, "web")
			secrets := client.CoreV1().Secrets(ns)
			_, err := secrets.Create(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Type: corev1.SecretTypeTLS,
				Data: map[string][]byte{corev1.TLSCertKey: crt1, corev1.TLSPrivateKeyKey: key1}}, metav1.CreateOptions{})
			require.NoError(t, err)
			createDeployment(t, client, deployment(ns, "web", withVolume(corev1.Volume{Name: "tls",
				VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls"}}})))
			p := startWave(t, ns, "--coalesce=0", "--source-ready-timeout="+tc.timeout)
			before := inputsHash(waitRecorded(t, client, ns, "web"))
			settle(t, p)

			write := func(key string, value []byte) {
				s, err := secrets.Get(ctx(t), "tls", metav1.GetOptions{})
				require.NoError(t, err)
				s.Data[key] = value
				_, err = secrets.Update(ctx(t), s, metav1.UpdateOptions{})
				require.NoError(t, err)
			}
			write(corev1.TLSCertKey, crt2) // the new certificate beside the old key
			require.Eventually(t, func() bool { return eventCount(t, client, ns, "web", "ConfigSourceIncomplete") >= 1 }, eventually, tick, "said on the workload")
			said := events(t, client, ns, "web", "ConfigSourceIncomplete")[0]
			assert.Equal(t, corev1.EventTypeWarning, said.Type)
			assert.Contains(t, said.Message, "secret/tls: tls.crt and tls.key are not a pair")
			for _, secret := range [][]byte{crt2, key1} {
				assert.NotContains(t, said.Message, string(secret[30:60]), "no value in the Event")
			}
			if tc.fixed {
				assert.Equal(t, before, inputsHash(getDeployment(t, client, ns, "web")), "nothing rolled while the pair is broken")
				assert.Contains(t, getDeployment(t, client, ns, "web").Annotations[rolloutrecord.Annotation], `"incompleteSince"`)
				write(corev1.TLSPrivateKeyKey, key2) // the key follows
			}
			waitTemplateHashChange(t, client, ns, "web", before)
			settle(t, p)
			if tc.fixed {
				assert.Equal(t, 1, eventCount(t, client, ns, "web", "ConfigSourceIncomplete"), "said once, and not again with the rollout of the pair")
				assert.NotContains(t, getDeployment(t, client, ns, "web").Annotations[rolloutrecord.Annotation], `"incompleteSince"`, "the wait is over")
			} else {
				require.Eventually(t, func() bool {
					for _, e := range events(t, client, ns, "web", "ConfigSourceIncomplete") {
						if strings.Contains(e.Message, "rolled with secret/tls") {
							return true
						}
					}
					return false
				}, eventually, tick, "the rollout past the timeout says what it rolled with")
			}
		})
	}
}
