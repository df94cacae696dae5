package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rollout"
)

var (
	cluster *testcluster.Cluster
	waveBin string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	bin, remove, err := testcluster.BuildCommand(".", "wave")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	waveBin = bin
	code := testcluster.Run(m, &cluster)
	remove()
	if plugin.remove != nil {
		plugin.remove()
	}
	os.Exit(code)
}

const (
	eventually = 30 * time.Second
	tick       = 20 * time.Millisecond
)

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return c
}

func adminClient(t testing.TB) kubernetes.Interface {
	t.Helper()
	testcluster.Need(t, cluster)
	client, err := kubernetes.NewForConfig(cluster.Config())
	require.NoError(t, err)
	return client
}

// startWave runs wave for one namespace with the admin kubeconfig unless args name another.
func startWave(t testing.TB, ns string, args ...string) *testcluster.Process {
	t.Helper()
	p, ready := tryStartWave(t, ns, args...)
	if !ready {
		t.Fatalf("wave exited with code %d before it was ready", p.Wait(t, time.Second))
	}
	return p
}

// tryStartWave is startWave for a wave that may exit at start (it fails closed, e.g. on RBAC
// that has not reached the authorizer yet): whether it became ready, and the process.
func tryStartWave(t testing.TB, ns string, args ...string) (*testcluster.Process, bool) {
	t.Helper()
	addr := testcluster.FreeAddr(t)
	full := []string{"--listen-address=" + addr, "--v=2", "--namespaces=" + ns}
	if !hasFlag(args, "--kubeconfig") {
		full = append(full, "--kubeconfig="+cluster.Kubeconfig())
	}
	p := testcluster.StartProcess(t, waveBin, nil, append(full, args...)...)
	p.Addr = addr
	require.Eventually(t, func() bool { return p.Ready() || p.Exited() }, 30*time.Second, 20*time.Millisecond, "wave neither ready nor exited")
	return p, p.Ready()
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if len(a) >= len(name) && a[:len(name)] == name {
			return true
		}
	}
	return false
}

func optIn(d *appsv1.Deployment) *appsv1.Deployment {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[podrefs.UpdateOnConfigChangeAnnotation] = "true"
	return d
}

func createCM(t testing.TB, client kubernetes.Interface, ns, name string, data map[string]string) {
	t.Helper()
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func createSecret(t testing.TB, client kubernetes.Interface, ns, name string, data map[string]string) {
	t.Helper()
	_, err := client.CoreV1().Secrets(ns).Create(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func patchCM(t testing.TB, client kubernetes.Interface, ns, name, patch string) {
	t.Helper()
	_, err := client.CoreV1().ConfigMaps(ns).Patch(ctx(t), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

func patchSecret(t testing.TB, client kubernetes.Interface, ns, name, patch string) {
	t.Helper()
	_, err := client.CoreV1().Secrets(ns).Patch(ctx(t), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

func getDeployment(t testing.TB, client kubernetes.Interface, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := client.AppsV1().Deployments(ns).Get(ctx(t), name, metav1.GetOptions{})
	require.NoError(t, err)
	return d
}

func createDeployment(t testing.TB, client kubernetes.Interface, d *appsv1.Deployment) {
	t.Helper()
	_, err := client.AppsV1().Deployments(d.Namespace).Create(ctx(t), d, metav1.CreateOptions{})
	require.NoError(t, err)
}

// waitRecorded waits until wave recorded the inputs of a workload (its baseline).
func waitRecorded(t testing.TB, client kubernetes.Interface, ns, name string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	require.Eventually(t, func() bool {
		d = getDeployment(t, client, ns, name)
		return d.Annotations[rollout.InputsAnnotation] != ""
	}, eventually, tick, "wave did not record the inputs of deployment %s/%s", ns, name)
	return d
}

// waitTemplateHash waits until the template's config hash differs from before.
func waitTemplateHashChange(t testing.TB, client kubernetes.Interface, ns, name, before string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	require.Eventually(t, func() bool {
		d = getDeployment(t, client, ns, name)
		return d.Spec.Template.Annotations[rollout.InputsHashAnnotation] != before
	}, eventually, tick, "deployment %s/%s did not roll", ns, name)
	return d
}

func inputsHash(d *appsv1.Deployment) string {
	return d.Spec.Template.Annotations[rollout.InputsHashAnnotation]
}

// replicaSets waits until the Deployment's rollout is complete and returns its ReplicaSets'
// template hashes, oldest first.
func replicaSets(t testing.TB, client kubernetes.Interface, ns, name string) []string {
	t.Helper()
	require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, name, eventually))
	d := getDeployment(t, client, ns, name)
	rss, err := testcluster.ReplicaSets(ctx(t), client, d)
	require.NoError(t, err)
	sort.Slice(rss, func(i, j int) bool { return rss[i].CreationTimestamp.Before(&rss[j].CreationTimestamp) })
	out := make([]string, len(rss))
	for i, rs := range rss {
		out[i] = rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	}
	return out
}

// settle waits until wave has handled every queued reconcile: nothing queued, no rollout held
// back, and for settleQuiet of wall time no write counted (rolled, baseline, error, held).
// Reconciles that end unchanged write nothing and are not counted: with a short --sync-period a
// resync ends one every period, and on a slow machine the samples of a count of quiet samples
// outlast the period, so that the fleet never looked settled (TestChangesThePodsCannotSeeRollNothing
// on one core).
func settle(t testing.TB, p *testcluster.Process) {
	t.Helper()
	var last string
	var since time.Time
	require.Eventually(t, func() bool {
		cur := fmt.Sprint(p.Metric(`configwave_wave_reconciles_total{result="rolled"}`),
			p.Metric(`configwave_wave_reconciles_total{result="baseline"}`), p.Metric(`configwave_wave_reconciles_total{result="error"}`),
			p.Metric(`configwave_wave_reconciles_total{result="held"}`))
		// A held rollout waits outside the queue (--coalesce, a floor): not settled until it went.
		busy := p.Metric("configwave_wave_queue_depth") != 0 || p.Metric("configwave_wave_rollouts_held") != 0
		if cur != last || busy {
			last, since = cur, time.Now()
			return false
		}
		return time.Since(since) >= settleQuiet
	}, eventually, 50*time.Millisecond, "wave never settled: reconciles still queued, held or writing")
}

// settleQuiet is how long wave must write nothing, with nothing queued, to count as settled:
// longer than one reconcile takes on a busy machine.
const settleQuiet = 500 * time.Millisecond

// waitReconciled waits until the "unchanged" counter passes n, i.e. wave looked again.
func waitUnchangedAbove(t testing.TB, p *testcluster.Process, n float64) {
	t.Helper()
	require.Eventually(t, func() bool { return p.Metric(`configwave_wave_reconciles_total{result="unchanged"}`) > n }, eventually, tick)
}

func events(t testing.TB, client kubernetes.Interface, ns, name, reason string) []corev1.Event {
	t.Helper()
	list, err := client.CoreV1().Events(ns).List(ctx(t), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	require.NoError(t, err)
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func controllerRevisions(t testing.TB, client kubernetes.Interface, ns string, selector map[string]string) int {
	t.Helper()
	list, err := client.AppsV1().ControllerRevisions(ns).List(ctx(t), metav1.ListOptions{LabelSelector: labels.SelectorFromSet(selector).String()})
	require.NoError(t, err)
	return len(list.Items)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
