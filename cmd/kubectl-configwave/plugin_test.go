package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/approval"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/rollout"
	"github.com/configwave/configwave/internal/wave/window"
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
	bin, remove, err := testcluster.BuildCommand("../wave", "wave")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	waveBin = bin
	code := testcluster.Run(m, &cluster)
	remove()
	os.Exit(code)
}

const (
	eventually = time.Minute
	tick       = 50 * time.Millisecond
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

// kubectlConfigwave runs the plugin as a user types it, with a kubeconfig: its output, and its
// error.
func kubectlConfigwave(t testing.TB, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot(&out, &errOut)
	root.SetArgs(append([]string{"--kubeconfig=" + kubeconfig}, args...))
	err := root.ExecuteContext(ctx(t))
	return out.String() + errOut.String(), err
}

func run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := kubectlConfigwave(t, cluster.Kubeconfig(), args...)
	require.NoError(t, err, "kubectl configwave %v: %s", args, out)
	return out
}

func startWave(t testing.TB, ns string) {
	t.Helper()
	addr := testcluster.FreeAddr(t)
	p := testcluster.StartProcess(t, waveBin, nil, "--listen-address="+addr, "--v=2", "--namespaces="+ns, "--kubeconfig="+cluster.Kubeconfig())
	p.Addr = addr
	require.Eventually(t, func() bool { return p.Ready() || p.Exited() }, eventually, tick, "wave neither ready nor exited")
	require.True(t, p.Ready(), "wave exited before it was ready")
}

func historyOf(t testing.TB, ns, what string) historyView {
	t.Helper()
	var v historyView
	require.NoError(t, json.Unmarshal([]byte(run(t, "history", what, "-n", ns, "-o", "json")), &v))
	return v
}

func newestHash(t testing.TB, client kubernetes.Interface, ns, name string) string {
	d, err := client.AppsV1().Deployments(ns).Get(ctx(t), name, metav1.GetOptions{})
	require.NoError(t, err)
	return d.Spec.Template.Annotations[rollout.InputsHashAnnotation]
}

// A Deployment with revisions through two config changes: history names each revision's
// snapshots and what changed, diff shows the ConfigMap's lines and only the Secret's key and
// sizes, an undo to a revision whose snapshot was deleted is refused, an undo to one whose
// config is kept goes ahead and wave holds it, and a user who may not patch the Deployment is
// told which RBAC rule is missing.
func TestHistoryDiffAndUndoOfADeployment(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	const secretV1, secretV2 = "s3cr3t-value-one", "s3cr3t-value-two!"
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"app.conf": "color=blue\nsize=1\n"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.CoreV1().Secrets(ns).Create(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"}, StringData: map[string]string{"password": secretV1}}, metav1.CreateOptions{})
	require.NoError(t, err)
	startWave(t, ns)
	d := testcluster.Deployment(ns, "web", 1)
	d.Annotations = map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true", revisions.OptInAnnotation: "true"}
	d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}}
	d.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/app"}} // an unmounted volume is no input
	d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}}
	_, err = client.AppsV1().Deployments(ns).Create(ctx(t), d, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return revisions.IsRevision(newestHash(t, client, ns, "web")) }, eventually, tick, "wave turns revisions on")
	first := newestHash(t, client, ns, "web")

	// One change of each source: the next revision, in the next second (as below).
	time.Sleep(1100 * time.Millisecond)
	_, err = client.CoreV1().ConfigMaps(ns).Update(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"app.conf": "color=green\nsize=1\n"}}, metav1.UpdateOptions{FieldManager: "helm"})
	require.NoError(t, err)
	_, err = client.CoreV1().Secrets(ns).Update(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"}, StringData: map[string]string{"password": secretV2}}, metav1.UpdateOptions{FieldManager: "helm"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { h := newestHash(t, client, ns, "web"); return h != first && revisions.IsRevision(h) }, eventually, tick, "wave rolls the change")
	second := newestHash(t, client, ns, "web")
	var h historyView
	if !assert.Eventually(t, func() bool {
		h = historyOf(t, ns, "deploy/web")
		n := len(h.Revisions)
		return n >= 3 && h.Revisions[n-1].InputsHash == second && h.Revisions[n-1].Outcome == "rolled out" && h.Revisions[n-2].InputsHash == first
	}, eventually, tick) {
		t.Fatalf("history does not show the rolled-out change: %+v", h)
	}
	n := len(h.Revisions)
	v1, v2 := h.Revisions[n-2], h.Revisions[n-1]
	assert.Equal(t, "revisions turned on", v1.Cause)
	require.Len(t, v2.Config, 2)
	assert.Equal(t, "configmap/app", v2.Config[0].Source)
	assert.NotEqual(t, v1.Config[0].Snapshot, v2.Config[0].Snapshot, "each content has its snapshot")
	assert.NotEmpty(t, v2.Config[1].Snapshot, "the Secret's too")
	assert.Equal(t, "config change: configmap/app changed (by helm), secret/db changed (by helm)", v2.Cause, "what changed, and who wrote it")
	assert.Equal(t, "replaced", v1.Outcome)
	table := run(t, "history", "deploy/web", "-n", ns)
	assert.Contains(t, table, "REVISION")
	assert.Contains(t, table, "configmap/app@"+v2.Config[0].Content)

	// diff: the ConfigMap's line, the Secret's key and sizes.
	diff := run(t, "diff", "deployment/web", "-n", ns)
	assert.Contains(t, diff, "-color=blue\n+color=green\n")
	assert.Contains(t, diff, fmt.Sprintf(`secret/db key "password": changed (%d bytes, now %d bytes)`, len(secretV1), len(secretV2)))
	for _, out := range []string{table, diff, run(t, "history", "deploy/web", "-n", ns, "-o", "yaml"), run(t, "pods", "deploy/web", "-n", ns, "-o", "json"),
		run(t, "diff", "deploy/web", "-n", ns, fmt.Sprintf("--revision=%d", v1.Revision), fmt.Sprintf("--to=%d", v2.Revision))} {
		for _, v := range []string{secretV1, secretV2} {
			sum := sha256.Sum256([]byte(v))
			assert.NotContains(t, out, v)
			assert.NotContains(t, out, base64.StdEncoding.EncodeToString([]byte(v)), "as -o json writes bytes")
			assert.NotContains(t, out, hex.EncodeToString(sum[:])[:16], "nor a digest of it")
		}
	}

	// A third change, then v2's snapshot of app is deleted: an undo to v2 is refused. It comes
	// in the next second: the API server keeps the times of writes and of revisions to the
	// second, and history names who wrote a change only where one revision fits the write.
	time.Sleep(1100 * time.Millisecond)
	_, err = client.CoreV1().ConfigMaps(ns).Update(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"app.conf": "color=red\nsize=1\n"}}, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { h := newestHash(t, client, ns, "web"); return h != second && revisions.IsRevision(h) }, eventually, tick, "wave rolls the third change")
	require.NoError(t, client.CoreV1().ConfigMaps(ns).Delete(ctx(t), v2.Config[0].Snapshot, metav1.DeleteOptions{}))
	out, err := kubectlConfigwave(t, cluster.Kubeconfig(), "undo", "deploy/web", "-n", ns, fmt.Sprintf("--to-revision=%d", v2.Revision))
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("revision %d of deployment/web cannot give its pods their config: its snapshot configmap %s is gone", v2.Revision, v2.Config[0].Snapshot), out)

	// A user who may read but not patch: told the rule.
	reader := readerKubeconfig(t, client, ns)
	_, err = kubectlConfigwave(t, reader, "history", "deploy/web", "-n", ns)
	require.NoError(t, err, "the read-only role is enough for history")
	_, err = kubectlConfigwave(t, reader, "undo", "deploy/web", "-n", ns, fmt.Sprintf("--to-revision=%d", v1.Revision))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kubectl create role configwave-patch-deployments --verb=patch --resource=deployments.apps -n "+ns)

	// To v1, whose config is kept: undone, and wave holds it there.
	assert.Contains(t, run(t, "undo", "deploy/web", "-n", ns, fmt.Sprintf("--to-revision=%d", v1.Revision)), fmt.Sprintf("rolled back to revision %d", v1.Revision))
	assert.Equal(t, first, newestHash(t, client, ns, "web"))
	if !assert.Eventually(t, func() bool {
		h = historyOf(t, ns, "deploy/web")
		last := h.Revisions[len(h.Revisions)-1]
		return last.InputsHash == first && last.Cause == "an undo brought it back" && strings.HasPrefix(last.Outcome, "held by an undo")
	}, eventually, tick) {
		t.Fatalf("history does not show the undo held: %+v", h)
	}
	n = len(h.Revisions)
	assert.Equal(t, "rolled back", h.Revisions[n-2].Outcome, "the third change, which the undo went back from")
	assert.Equal(t, "config change: configmap/app changed (by kubectl-edit)", h.Revisions[n-2].Cause)
	assert.Equal(t, v2.Revision, h.Revisions[n-3].Revision)
	assert.Equal(t, "replaced", h.Revisions[n-3].Outcome, "the second change was replaced by the third, not rolled back")
	assert.Equal(t, "config change: configmap/app changed, secret/db changed (by helm)", h.Revisions[n-3].Cause,
		"what it was made of, though its snapshot is gone; the ConfigMap's writer then is not known since kubectl-edit took its field")
	t.Logf("kubectl configwave history deploy/web:\n%s", run(t, "history", "deploy/web", "-n", ns))
	t.Logf("kubectl configwave diff deploy/web:\n%s", diff)
	var p podsOut
	require.Eventually(t, func() bool {
		require.NoError(t, json.Unmarshal([]byte(run(t, "pods", "deploy/web", "-n", ns, "-o", "json")), &p))
		return len(p.Revisions) == 1 && len(p.Revisions[0].Pods) == 1 && p.Revisions[0].Pods[0].Ready
	}, eventually, tick, "the undone revision's pod, ready, alone")
	assert.Equal(t, h.Revisions[len(h.Revisions)-1].Revision, p.Revisions[0].Revision)
	t.Logf("kubectl configwave pods deploy/web:\n%s", run(t, "pods", "deploy/web", "-n", ns))
}

// readerKubeconfig is a kubeconfig of a ServiceAccount that may read what the plugin reads in
// ns, and write nothing.
func readerKubeconfig(t *testing.T, client kubernetes.Interface, ns string) string {
	t.Helper()
	_, err := client.RbacV1().Roles(ns).Create(ctx(t), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "configwave-reader"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets", "daemonsets", "controllerrevisions"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets", "pods"}, Verbs: []string{"get", "list"}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.CoreV1().ServiceAccounts(ns).Create(ctx(t), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.RbacV1().RoleBindings(ns).Create(ctx(t), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "configwave-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tok, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx(t), "reader", &authv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	kubeconfig, err := cluster.KubeconfigFor(t.TempDir(), tok.Status.Token)
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the Role reaches the authorizer in a moment
		_, err := kubectlConfigwave(t, kubeconfig, "history", "deploy/web", "-n", ns)
		return err == nil
	}, eventually, tick)
	return kubeconfig
}

// A StatefulSet's and a DaemonSet's revisions are ControllerRevisions: history names each
// one's snapshots, pods maps each pod to its revision (a DaemonSet's pods carry the hash only),
// and undo applies the earlier revision as kubectl rollout undo does.
func TestHistoryPodsAndUndoOfSets(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"k": "v1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	startWave(t, ns)
	annotations := map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true", revisions.OptInAnnotation: "true"}
	template := func(app string) corev1.PodTemplateSpec {
		tmpl := testcluster.Deployment(ns, app, 1).Spec.Template
		tmpl.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "K", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Key: "k"}}}}
		return tmpl
	}
	_, err = client.AppsV1().StatefulSets(ns).Create(ctx(t), &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Annotations: annotations},
		Spec: appsv1.StatefulSetSpec{Replicas: new(int32(1)), ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, Template: template("db")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.AppsV1().DaemonSets(ns).Create(ctx(t), &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Annotations: annotations},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}, Template: template("agent")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	hashOf := map[string]func() string{
		"sts/db": func() string {
			s, err := client.AppsV1().StatefulSets(ns).Get(ctx(t), "db", metav1.GetOptions{})
			require.NoError(t, err)
			return s.Spec.Template.Annotations[rollout.InputsHashAnnotation]
		},
		"ds/agent": func() string {
			d, err := client.AppsV1().DaemonSets(ns).Get(ctx(t), "agent", metav1.GetOptions{})
			require.NoError(t, err)
			return d.Spec.Template.Annotations[rollout.InputsHashAnnotation]
		},
	}
	first := map[string]string{}
	for what, hash := range hashOf {
		require.Eventually(t, func() bool { return revisions.IsRevision(hash()) }, eventually, tick, "%s: wave turns revisions on", what)
		first[what] = hash()
	}
	// Creation times are kept to the second: the change comes in the next one, so that the
	// undo below is told by creation alone, as for any ControllerRevision.
	time.Sleep(1100 * time.Millisecond)
	_, err = client.CoreV1().ConfigMaps(ns).Update(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"k": "v2"}}, metav1.UpdateOptions{FieldManager: "argocd-controller"})
	require.NoError(t, err)
	for what, hash := range hashOf {
		t.Run(what, func(t *testing.T) {
			require.Eventually(t, func() bool { h := hash(); return h != first[what] && revisions.IsRevision(h) }, eventually, tick, "wave rolls the change")
			h := historyOf(t, ns, what)
			require.GreaterOrEqual(t, len(h.Revisions), 2)
			older, newest := h.Revisions[len(h.Revisions)-2], h.Revisions[len(h.Revisions)-1]
			assert.Equal(t, first[what], older.InputsHash)
			assert.Equal(t, "config change: configmap/app changed (by argocd-controller)", newest.Cause, "who wrote it, from its managedFields")
			assert.Contains(t, newest.Object, "controllerrevision/")
			assert.Contains(t, run(t, "diff", what, "-n", ns), "-v1\n+v2\n", "the line that changed")
			out, err := kubectlConfigwave(t, cluster.Kubeconfig(), "approve", what, "-n", ns)
			require.Error(t, err, out)
			assert.Contains(t, err.Error(), "waits for approval", "approve on this kind: nothing waits")

			// Each pod under its revision, once the set's controller replaced it.
			var p podsOut
			require.Eventually(t, func() bool {
				require.NoError(t, json.Unmarshal([]byte(run(t, "pods", what, "-n", ns, "-o", "json")), &p))
				return len(p.Revisions) == 1 && p.Revisions[0].Revision == newest.Revision && len(p.Revisions[0].Pods) == 1 && p.Revisions[0].Pods[0].Ready
			}, eventually, tick, "the pod of the newest revision, ready")
			require.Len(t, p.Revisions[0].Pods[0].Config, 1)
			assert.Equal(t, "configmap/app", p.Revisions[0].Pods[0].Config[0].Source)

			assert.Contains(t, run(t, "undo", what, "-n", ns), fmt.Sprintf("rolled back to revision %d", older.Revision))
			assert.Equal(t, first[what], hash())
			if !assert.Eventually(t, func() bool {
				h = historyOf(t, ns, what)
				last := h.Revisions[len(h.Revisions)-1]
				return last.InputsHash == first[what] && last.Cause == "an undo brought it back" && strings.HasPrefix(last.Outcome, "held by an undo")
			}, eventually, tick) {
				t.Fatalf("history does not show the undo held: %+v", h)
			}
			assert.Equal(t, "rolled back", h.Revisions[len(h.Revisions)-2].Outcome)
		})
	}
}

// configwave.io/approval: "manual": a change waits, history says so, a user who may not patch
// the workload is told the rule, approve rolls that change (and wave removes the approval), a
// newer change waits again, and reject leaves the pods on their config.
func TestApproveAndReject(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"k": "v1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	startWave(t, ns)
	d := testcluster.Deployment(ns, "web", 1)
	d.Annotations = map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true", approval.Annotation: approval.Manual, revisions.OptInAnnotation: "true"}
	d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}
	_, err = client.AppsV1().Deployments(ns).Create(ctx(t), d, metav1.CreateOptions{})
	require.NoError(t, err)
	pendingID := func() string {
		var h historyView
		require.NoError(t, json.Unmarshal([]byte(run(t, "history", "deploy/web", "-n", ns, "-o", "json")), &h))
		if h.Pending == nil {
			return ""
		}
		return h.Pending.ID
	}
	// Turning revisions on is a rollout too: it waits like any other.
	require.Eventually(t, func() bool { return pendingID() != "" }, eventually, tick, "turning revisions on waits for approval")
	assert.False(t, revisions.IsRevision(newestHash(t, client, ns, "web")))
	assert.Contains(t, run(t, "approve", "deploy/web", "-n", ns), "is approved")
	require.Eventually(t, func() bool { return revisions.IsRevision(newestHash(t, client, ns, "web")) && pendingID() == "" }, eventually, tick, "the approved rollout")
	before := newestHash(t, client, ns, "web")
	out, err := kubectlConfigwave(t, cluster.Kubeconfig(), "approve", "deploy/web", "-n", ns)
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), "no config change of deployment/web in namespace "+ns+" waits for approval")

	change := func(v string) {
		t.Helper()
		_, err := client.CoreV1().ConfigMaps(ns).Update(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"k": v}}, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	change("v2")
	var first string
	require.Eventually(t, func() bool { first = pendingID(); return first != "" }, eventually, tick, "the change waits")
	assert.Equal(t, before, newestHash(t, client, ns, "web"), "nothing rolled: the pending write is the decision")
	assert.Contains(t, run(t, "history", "deploy/web", "-n", ns), "waits for approval")
	assert.Contains(t, run(t, "diff", "deploy/web", "-n", ns, "--live"), "-v1\n+v2\n", "what the change brings")

	reader := readerKubeconfig(t, client, ns)
	_, err = kubectlConfigwave(t, reader, "approve", "deploy/web", "-n", ns)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kubectl create role configwave-patch-deployments --verb=patch --resource=deployments.apps -n "+ns)

	assert.Contains(t, run(t, "approve", "deploy/web", "-n", ns), "is approved")
	require.Eventually(t, func() bool { return newestHash(t, client, ns, "web") != before }, eventually, tick, "the approved change rolls")
	require.Eventually(t, func() bool {
		d, err := client.AppsV1().Deployments(ns).Get(ctx(t), "web", metav1.GetOptions{})
		require.NoError(t, err)
		_, left := d.Annotations[approval.ApproveAnnotation]
		return !left && pendingID() == ""
	}, eventually, tick, "wave removes the approval with the rollout, and nothing waits")

	rolled := newestHash(t, client, ns, "web")
	change("v3")
	var second string
	require.Eventually(t, func() bool { second = pendingID(); return second != "" }, eventually, tick, "the next change waits again")
	assert.NotEqual(t, first, second)
	assert.Contains(t, run(t, "reject", "deploy/web", "-n", ns), "is rejected")
	require.Eventually(t, func() bool { return pendingID() == "" }, eventually, tick, "nothing waits once rejected")
	assert.Equal(t, rolled, newestHash(t, client, ns, "web"), "the rejected change did not roll")
}

// A change outside the workload's rollout window waits; history says until when, and
// rollout-now rolls it at once.
func TestRolloutNow(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"k": "v1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	opens := time.Now().UTC().Add(12 * time.Hour) // closed for the whole test, on any machine
	d := testcluster.Deployment(ns, "web", 1)
	d.Annotations = map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true",
		window.Annotation: fmt.Sprintf("%s %02d:%02d-%02d:%02d UTC", opens.Weekday().String()[:3], opens.Hour(), opens.Minute(), (opens.Hour()+1)%24, opens.Minute())}
	d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}
	_, err = client.AppsV1().Deployments(ns).Create(ctx(t), d, metav1.CreateOptions{})
	require.NoError(t, err)
	startWave(t, ns)
	require.Eventually(t, func() bool {
		d, err := client.AppsV1().Deployments(ns).Get(ctx(t), "web", metav1.GetOptions{})
		require.NoError(t, err)
		return d.Annotations[rollout.InputsAnnotation] != ""
	}, eventually, tick, "wave records the config the pods start with")
	before := newestHash(t, client, ns, "web")
	assert.Contains(t, run(t, "rollout-now", "deploy/web", "-n", ns), "with nothing waiting, wave removes the annotation")
	require.Eventually(t, func() bool {
		d, err := client.AppsV1().Deployments(ns).Get(ctx(t), "web", metav1.GetOptions{})
		require.NoError(t, err)
		_, left := d.Annotations[window.NowAnnotation]
		return !left
	}, eventually, tick, "wave removes a rollout-now that asks for nothing, so it decides no later change")

	_, err = client.CoreV1().ConfigMaps(ns).Update(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"k": "v2"}}, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return historyOf(t, ns, "deploy/web").DeferredUntil != nil }, eventually, tick, "the change waits for the window")
	assert.Equal(t, before, newestHash(t, client, ns, "web"))
	assert.Contains(t, run(t, "history", "deploy/web", "-n", ns), "waiting for its window")
	assert.Contains(t, run(t, "rollout-now", "deploy/web", "-n", ns), "asked to roll now")
	require.Eventually(t, func() bool { return newestHash(t, client, ns, "web") != before }, eventually, tick, "rolled at once")
	require.Eventually(t, func() bool { return historyOf(t, ns, "deploy/web").DeferredUntil == nil }, eventually, tick, "nothing waits")
}
