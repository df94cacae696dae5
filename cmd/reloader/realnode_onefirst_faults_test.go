package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/reloader/onefirst"
	"github.com/configwave/configwave/internal/reloader/source"
	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// oneFirstNode is the Deployment of TestOneFirstOnARealNode: its pods, their config files as
// kubelet keeps them on the node, and the Lease its sidecars share.
type oneFirstNode struct {
	t        *testing.T
	client   kubernetes.Interface
	node     *testcluster.Node
	ns       string
	replicas int
	soak     time.Duration
}

func (f *oneFirstNode) pods() []corev1.Pod {
	list, err := f.client.CoreV1().Pods(f.ns).List(ctx(f.t), metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(f.t, err)
	return list.Items
}

func (f *oneFirstNode) conf(p corev1.Pod) string {
	b, _ := os.ReadFile(filepath.Join(f.node.PodEmptyDir(p.UID, "config"), "nginx.conf"))
	return string(b)
}

var servedVersion = regexp.MustCompile(`return \d+ "(v\d+)\\n"`)

// version is the version a pod's config file serves ("" when none is read).
func (f *oneFirstNode) version(p corev1.Pod) string {
	if m := servedVersion.FindStringSubmatch(f.conf(p)); m != nil {
		return m[1]
	}
	return ""
}

func (f *oneFirstNode) allOn(version string) bool {
	ps := f.pods()
	if len(ps) != f.replicas {
		return false
	}
	for _, p := range ps {
		if !testcluster.PodReady(p) || f.version(p) != version {
			return false
		}
	}
	return true
}

// patch writes version into the ConfigMap and returns the content id the sidecars give it.
func (f *oneFirstNode) patch(version string, readiness int) string {
	patchData(f.t, f.client, f.ns, "app-config", fmt.Sprintf(`{"data":{"nginx.conf":%q}}`, nginxConf(version, readiness)))
	cm, err := f.client.CoreV1().ConfigMaps(f.ns).Get(ctx(f.t), "app-config", metav1.GetOptions{})
	require.NoError(f.t, err)
	return onefirst.SnapshotID(source.Snapshot{Objects: []source.Object{{Ref: configref.Ref{Kind: configref.ConfigMap, Namespace: f.ns, Name: "app-config"},
		Version: string(cm.UID) + "/" + cm.ResourceVersion}}})
}

// record is the rollout record on the sidecars' Lease, nil before the first change.
func (f *oneFirstNode) record() *onefirst.Record {
	leases, err := f.client.CoordinationV1().Leases(f.ns).List(ctx(f.t), metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=configwave-reloader"})
	require.NoError(f.t, err)
	require.LessOrEqual(f.t, len(leases.Items), 1, "one Lease for the one workload and source")
	if len(leases.Items) == 0 {
		return nil
	}
	l := leases.Items[0]
	var since, renewed time.Time
	if l.Spec.AcquireTime != nil {
		since = l.Spec.AcquireTime.Time
	}
	if l.Spec.RenewTime != nil {
		renewed = l.Spec.RenewTime.Time
	}
	r, err := onefirst.ParseRecord(l.Annotations, valueOr(l.Spec.HolderIdentity), since, renewed)
	require.NoError(f.t, err, "the Lease the sidecars wrote")
	return r
}

func valueOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// killSidecar kills a pod's reloader as an OOM kill does (SIGKILL) and waits until kubelet has
// restarted it; it returns when it was killed.
func (f *oneFirstNode) killSidecar(pod string) time.Time {
	t := f.t
	p, err := f.client.CoreV1().Pods(f.ns).Get(ctx(t), pod, metav1.GetOptions{})
	require.NoError(t, err)
	var id string
	restarts := int32(0)
	for _, c := range p.Status.InitContainerStatuses {
		if c.Name == "reloader" {
			id, restarts = c.ContainerID, c.RestartCount
		}
	}
	pid, err := f.node.ContainerPID(ctx(t), id)
	require.NoError(t, err, "pod %s's sidecar", pod)
	killed := time.Now()
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	require.Eventually(t, func() bool {
		p, err := f.client.CoreV1().Pods(f.ns).Get(ctx(t), pod, metav1.GetOptions{})
		require.NoError(t, err)
		for _, c := range p.Status.InitContainerStatuses {
			if c.Name == "reloader" && c.RestartCount > restarts && c.Started != nil && *c.Started {
				return true
			}
		}
		return false
	}, 2*time.Minute, 200*time.Millisecond, "kubelet restarts pod %s's killed sidecar", pod)
	return killed
}

// faults is the story's part under faults (issue: one pod first under the faults it exists
// for): the first pod's sidecar killed mid-soak, a pod kept unready on purpose, and three
// changes 1 s apart, good and then with the newest bad.
func (f *oneFirstNode) faults() {
	t := f.t
	// The first pod's sidecar killed mid-soak: its judgement of the app restarted with it, so
	// the soak starts again (the Lease's acquireTime moves past the kill), and no second pod
	// takes the change before a whole soak after the restart.
	v8 := f.patch("v8", 200)
	var first corev1.Pod
	require.Eventually(t, func() bool {
		for _, p := range f.pods() {
			if f.version(p) == "v8" {
				first = p
				return true
			}
		}
		return false
	}, eventually, 100*time.Millisecond, "one pod takes v8 first")
	if r := f.record(); r == nil || r.Content != v8 || r.State != onefirst.Soaking || r.First != first.Name {
		t.Fatalf("v8 is no longer in %s's soak when its sidecar is to be killed (a machine too slow for a %s soak?): %+v", first.Name, f.soak, r)
	}
	killed := f.killSidecar(first.Name)
	restarted := time.Now()
	var r *onefirst.Record
	for {
		require.Less(t, time.Since(killed), 2*time.Minute, "v8 promoted after its first pod's sidecar was killed mid-soak; pods: %s", testcluster.DescribePods(ctx(t), f.client, f.ns))
		on := 0 // the files first, then the record: a promotion in between is seen
		for _, p := range f.pods() {
			if f.version(p) == "v8" {
				on++
			}
		}
		if r = f.record(); r != nil && r.Content == v8 && r.State == onefirst.Promoted {
			break
		}
		require.LessOrEqual(t, on, 1, "no second pod takes v8 before it is promoted")
		time.Sleep(100 * time.Millisecond)
	}
	promotedAt := time.Now()
	require.True(t, r.Since.After(killed), "the soak that promoted v8 began after the kill (acquireTime %s, killed %s): not a judgement that restarted with the sidecar", r.Since, killed)
	require.Eventually(t, func() bool { return f.allOn("v8") }, 2*time.Minute, 100*time.Millisecond, "v8 reaches every pod")
	t.Logf("first pod's sidecar killed mid-soak: restarted %s after the kill, its soak started again %s after the kill, promoted %s after the restart; every pod on v8 %s after the restart",
		restarted.Sub(killed).Round(100*time.Millisecond), r.Since.Sub(killed).Round(100*time.Millisecond), promotedAt.Sub(restarted).Round(100*time.Millisecond),
		time.Since(restarted).Round(100*time.Millisecond))

	// A pod kept unready on purpose (its readiness location answers 503 while a file is there,
	// as an app whose dependency is down does): it neither claims nor rejects a good change,
	// and follows it once the others promoted it. Made unready once v8's batches are over, so
	// that it is no batch pod of v8 (which would reject v8, rightly).
	require.Eventually(t, func() bool {
		r := f.record()
		return r != nil && r.Content == v8 && r.State == onefirst.Promoted && len(r.Batch) == 0 && f.allOn("v8")
	}, eventually, 100*time.Millisecond, "v8's rollout over")
	unready := f.pods()[0]
	flag := filepath.Join(f.node.PodEmptyDir(unready.UID, "tmp"), "unready")
	require.NoError(t, os.WriteFile(flag, nil, 0o644))
	require.Eventually(t, func() bool {
		p, err := f.client.CoreV1().Pods(f.ns).Get(ctx(t), unready.Name, metav1.GetOptions{})
		require.NoError(t, err)
		return !testcluster.PodReady(*p)
	}, eventually, 100*time.Millisecond, "pod %s not Ready", unready.Name)
	r = f.record()
	require.Equal(t, onefirst.Promoted, r.State, "v8 stays promoted while a pod goes unready: %s", r.Reason)
	v9 := f.patch("v9", 200)
	patched := time.Now()
	for {
		require.Less(t, time.Since(patched), 2*time.Minute, "the Ready pods take v9 while one pod is kept unready; pods: %s", testcluster.DescribePods(ctx(t), f.client, f.ns))
		if r := f.record(); r != nil && r.Content == v9 {
			require.NotEqual(t, unready.Name, r.First, "the unready pod claims no change")
			require.NotEqual(t, onefirst.Rejected, r.State, "a pod kept unready for its own reasons rejects no good change: %s", r.Reason)
		}
		others, followed := 0, false
		for _, p := range f.pods() {
			switch {
			case p.Name == unready.Name:
				followed = f.version(p) == "v9"
			case testcluster.PodReady(p) && f.version(p) == "v9":
				others++
			}
		}
		if others == f.replicas-1 && followed {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, os.Remove(flag))
	require.Eventually(t, func() bool { return f.allOn("v9") }, eventually, 100*time.Millisecond, "the pod kept unready is Ready on v9 once let go")
	t.Logf("one pod kept unready: the other three on v9 and the unready one following %s after the patch; it claimed and rejected nothing", time.Since(patched).Round(100*time.Millisecond))

	// Three changes 1 s apart: every pod ends on the newest (good) or, when the newest is bad, on
	// the last promoted; never more than --rollout-max-unavailable (1) pod off a promoted config
	// but for a moment (another pod's claim can race the first pod's own, until the first pod
	// sees it and puts its trial back).
	promoted := map[string]bool{"v9": true}
	f.burst(promoted, [3]string{"v10", "v11", "v12"}, 200, "v12")
	f.burst(promoted, [3]string{"v13", "v14", "v15"}, 503, "v12")
}

// raceFor is how long more than one pod may be off a promoted config: the moment another pod's
// claim of a newer content races the first pod's, until the first pod sees it and puts its
// trial back.
const raceFor = 2 * time.Second

// burst patches three versions 1 s apart, the last with readiness answering last, and samples
// every 100 ms until every pod is Ready on want and the Lease has judged the last: no more than
// one pod at a time runs a version the Lease has not promoted (read after the files, so a
// promotion between is counted), but for a moment (raceFor).
func (f *oneFirstNode) burst(promoted map[string]bool, versions [3]string, last int, want string) {
	t := f.t
	ids := map[string]string{}
	var lastID string
	judged := false
	var overSince time.Time // when more than one pod was first seen off a promoted config, in a row
	mostOff := 0
	start := time.Now()
	next := start
	for sent := 0; ; {
		if sent < len(versions) && !time.Now().Before(next) {
			readiness := 200
			if sent == len(versions)-1 {
				readiness = last
			}
			lastID = f.patch(versions[sent], readiness)
			ids[lastID] = versions[sent]
			next, sent = next.Add(time.Second), sent+1
		}
		ps := f.pods()
		running := map[string]string{}
		for _, p := range ps {
			running[p.Name] = f.version(p)
		}
		if r := f.record(); r != nil {
			if r.State == onefirst.Promoted && ids[r.Content] != "" {
				promoted[ids[r.Content]] = true
			}
			judged = sent == len(versions) && r.Content == lastID && r.State != onefirst.Soaking
		}
		var off []string
		for pod, v := range running {
			if v != "" && !promoted[v] {
				off = append(off, pod+"="+v)
			}
		}
		mostOff = max(mostOff, len(off))
		switch {
		case len(off) <= 1:
			overSince = time.Time{}
		case overSince.IsZero():
			overSince = time.Now()
		default:
			require.Less(t, time.Since(overSince), raceFor, "at most --rollout-max-unavailable (1) pod off a promoted config but for a moment, %s after the first of %v: %v",
				time.Since(start).Round(100*time.Millisecond), versions, off)
		}
		if judged && f.allOn(want) {
			break
		}
		require.Less(t, time.Since(start), 2*time.Minute, "every pod on %s after %v; pods: %s", want, versions, testcluster.DescribePods(ctx(t), f.client, f.ns))
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("three changes 1 s apart (%s): every pod on %s %s after the first; at most %d pods off a promoted config at a sample (1 but for a moment)",
		strings.Join(versions[:], ", "), want, time.Since(start).Round(100*time.Millisecond), mostOff)
}
