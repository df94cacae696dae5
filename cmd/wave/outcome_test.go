package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/rollout"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
)

// chatHook is a chat service's incoming webhook on loopback.
type chatHook struct {
	mu    sync.Mutex
	texts []string
}

func (h *chatHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var body struct{ Text string }
	if json.Unmarshal(b, &body) != nil || body.Text == "" {
		http.Error(w, "no text", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.texts = append(h.texts, body.Text)
	h.mu.Unlock()
}

func (h *chatHook) all() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.texts, "\n")
}

// One ConfigMap change reaches three Deployments: one rolls out, and says so; another's new
// pods never become ready (a kwok stage) while its old pod keeps serving, and once its
// progress deadline passes wave says that rollout failed, in an Event, the metric, /status
// and the webhook; the third's new pods crash-loop, which wave sees in their status without
// waiting for the deadline. When the team fixes one, wave says it recovered. No value
// reaches any of these.
func TestConfigRolloutOutcomes(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	const secretValue = "hunter2-outcome-sekret"
	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	createSecret(t, client, ns, "db", map[string]string{"password": secretValue})
	withSecret := func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = append(s.Containers[0].EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("db")}})
	}
	createDeployment(t, client, deployment(ns, "good", withEnvKey("cm", "a"), withSecret))
	bad := deployment(ns, "bad", withEnvKey("cm", "a"), withSecret)
	bad.Spec.Template.Labels = map[string]string{"app": "bad", testcluster.NeverReadyLabel: "true"} // the selector keeps app=bad only
	deadline := int32(3)
	bad.Spec.ProgressDeadlineSeconds = &deadline
	createDeployment(t, client, bad)
	crashing := deployment(ns, "crashing", withEnvKey("cm", "a")) // the default progress deadline: 10 minutes
	crashing.Spec.Template.Labels = map[string]string{"app": "crashing", testcluster.CrashLoopLabel: "true"}
	createDeployment(t, client, crashing)
	createDeployment(t, client, deployment(ns, "later", withEnvKey("later-cm", "a"))) // its config does not exist yet
	hook := &chatHook{}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	p := startWave(t, ns, "--notify-webhook="+srv.URL+"/services/T0/B0/hooksecret", "--v=5")
	for _, name := range []string{"good", "bad", "crashing"} {
		waitRecorded(t, client, ns, name)
		require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, name, eventually))
	}

	patchCM(t, client, ns, "cm", `{"data":{"a":"2"}}`)
	require.Eventually(t, func() bool { return len(events(t, client, ns, "good", "ConfigRolledOut")) > 0 }, eventually, tick, "the good rollout is reported")
	assert.Contains(t, events(t, client, ns, "good", "ConfigRolledOut")[0].Message, "configmap/cm change is rolled out")
	require.Eventually(t, func() bool { return len(events(t, client, ns, "bad", "ConfigRolloutFailed")) > 0 }, eventually, tick,
		"the crash-looping rollout is reported once its 3 s progress deadline passed")
	failed := events(t, client, ns, "bad", "ConfigRolloutFailed")[0]
	assert.Equal(t, corev1.EventTypeWarning, failed.Type)
	assert.Contains(t, failed.Message, "configmap/cm change failed")
	assert.Contains(t, failed.Message, "timed out progressing")
	assert.GreaterOrEqual(t, getDeployment(t, client, ns, "bad").Status.AvailableReplicas, int32(1), "the old pod keeps serving")
	// Its new pods crash-loop: wave sees it in their status, long before the 10-minute deadline.
	require.Eventually(t, func() bool { return len(events(t, client, ns, "crashing", "ConfigRolloutFailed")) > 0 }, eventually, tick,
		"a crash-looping rollout is reported without waiting for the progress deadline")
	assert.Regexp(t, `the configmap/cm change failed: pod crashing-[a-z0-9-]+ of the new config: container "app" is in CrashLoopBackOff \(5 restarts\)`,
		events(t, client, ns, "crashing", "ConfigRolloutFailed")[0].Message)

	assert.Equal(t, 2.0, p.Metric(`configwave_wave_rollouts_total{result="failed"}`))
	assert.Equal(t, 1.0, p.Metric(`configwave_wave_rollouts_total{result="succeeded"}`))
	assert.Equal(t, 2.0, p.Metric(`configwave_wave_rollout_duration_seconds_count{result="failed"}`))
	assert.Equal(t, 1.0, p.Metric(`configwave_wave_rollout_duration_seconds_count{result="succeeded"}`))
	assert.Equal(t, 3.0, p.Metric(`configwave_wave_trigger_duration_seconds_count`), "one change, three rollouts; the workload waiting for its config rolled nothing")
	assert.Greater(t, p.Metric(`configwave_wave_trigger_duration_seconds_sum`), 0.0)
	for state, want := range map[string]float64{"up_to_date": 1, "rolling": 0, "failed": 2, "missing_config": 1} {
		assert.Equal(t, want, p.Metric(`configwave_wave_workloads{state="`+state+`"}`), state)
	}
	// Every series of the metrics reference is exported, under its documented name.
	documented, err := testcluster.DocumentedMetrics(filepath.Join("..", "..", "docs", "metrics.md"), "wave")
	require.NoError(t, err)
	exported := p.MetricNames()
	for _, name := range documented {
		if name == "reloader_reload_executed_total_by_namespace" {
			continue // only with METRICS_COUNT_BY_NAMESPACE=enabled, as in Reloader (TestStakaterChartArguments)
		}
		if name == "configwave_wave_revisions_webhook_ca_trusted" {
			continue // only with --revisions-webhook-cert-secret (TestRevisionsWebhookCertificateMadeByWave)
		}
		assert.True(t, exported[name], "docs/metrics.md lists %s, which wave does not export", name)
	}
	code, body := p.Get("/status")
	require.Equal(t, http.StatusOK, code)
	var status rollout.Status
	require.NoError(t, json.Unmarshal([]byte(body), &status), body)
	assert.True(t, status.Leader)
	assert.Equal(t, 1.0, p.Metric("configwave_wave_leader"), "the leader gauge says so too")
	// The version the binary says it is: "(devel)", or with VCS stamping on (GOFLAGS without
	// -buildvcs=false, in a git checkout) a pseudo-version.
	out, err := exec.Command(waveBin, "--version").Output()
	require.NoError(t, err)
	version := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "wave"))
	assert.Equal(t, 1.0, p.Metric(`configwave_build_info{binary="wave",goversion="`+runtime.Version()+`",version="`+version+`"}`), "version %q", version)
	require.Len(t, status.Failed, 2)
	assert.Equal(t, "deployment "+ns+"/bad", status.Failed[0].Workload)
	assert.Equal(t, "deployment "+ns+"/crashing", status.Failed[1].Workload)
	assert.Equal(t, "configmap/cm", status.Failed[0].Change)
	require.Eventually(t, func() bool { return strings.Contains(hook.all(), "failed") }, eventually, tick, "the team is told")
	assert.Contains(t, hook.all(), "deployment "+ns+"/bad")
	assert.Contains(t, hook.all(), "configmap/cm")

	// wave status, run as a ServiceAccount that may only read workloads in this namespace.
	rows := waveStatus(t, readOnlyKubeconfig(t, client, ns), ns)
	require.Len(t, rows, 4, "every opted-in workload")
	byName := map[string]WorkloadStatus{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	assert.Equal(t, rolloutrecord.Failed, byName["bad"].State)
	assert.Contains(t, byName["bad"].Reason, "timed out progressing")
	assert.Equal(t, []string{"configmap/cm", "secret/db"}, byName["bad"].Config)
	assert.Equal(t, rolloutrecord.Failed, byName["crashing"].State, "the controller noted it in the rollout record")
	assert.Contains(t, byName["crashing"].Reason, "CrashLoopBackOff")
	assert.Equal(t, rolloutrecord.UpToDate, byName["good"].State)
	assert.Equal(t, "configmap/cm", byName["good"].Change)
	assert.False(t, byName["good"].Since.IsZero())
	assert.Equal(t, rolloutrecord.Waiting, byName["later"].State)
	assert.Equal(t, "configmap/later-cm missing", byName["later"].Reason)

	// The team fixes the app; its pods now start, and wave says the config is out.
	_, err = client.AppsV1().Deployments(ns).Patch(ctx(t), "bad", types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/spec/template/metadata/labels/configwave.test~1new-pods-never-ready"}]`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(events(t, client, ns, "bad", "ConfigRolledOut")) > 0 }, eventually, tick, "the recovery is reported")
	require.Eventually(t, func() bool { return strings.Contains(hook.all(), "recovered") }, eventually, tick)
	_, body = p.Get("/status")
	require.NoError(t, json.Unmarshal([]byte(body), &status))
	require.Len(t, status.Failed, 1, "listed until the workload is up to date")
	assert.Equal(t, "deployment "+ns+"/crashing", status.Failed[0].Workload)
	rec, err := rolloutrecord.ParseRecord(getDeployment(t, client, ns, "bad").Annotations[rolloutrecord.Annotation])
	require.NoError(t, err)
	assert.Equal(t, "configmap/cm", rec.Change)

	// Nothing of the Secret's value anywhere wave writes or says.
	all, err := client.CoreV1().Events(ns).List(ctx(t), metav1.ListOptions{})
	require.NoError(t, err)
	for _, e := range all.Items {
		assert.NotContains(t, e.Message, secretValue)
	}
	for _, name := range []string{"good", "bad", "crashing"} {
		d := getDeployment(t, client, ns, name)
		for k, v := range d.Annotations {
			assert.NotContains(t, v, secretValue, k)
		}
	}
	assert.NotContains(t, hook.all(), secretValue)
	assert.NotContains(t, body, secretValue)
	assert.NotContains(t, p.Log(), secretValue)
	assert.NotContains(t, p.Log(), "hooksecret", "the webhook URL is a credential")
}

// readOnlyKubeconfig is a kubeconfig for a ServiceAccount that may get and list Deployments,
// StatefulSets, DaemonSets and CronJobs in ns, and nothing else.
func readOnlyKubeconfig(t *testing.T, client kubernetes.Interface, ns string) string {
	t.Helper()
	return roleKubeconfig(t, client, ns, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "status-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"batch"}, Resources: []string{"cronjobs"}, Verbs: []string{"get", "list"}}}})
}

// roleKubeconfig creates role in ns, a ServiceAccount of the same name bound to it, and
// returns a kubeconfig with that ServiceAccount's token: the access the role grants, no more.
func roleKubeconfig(t *testing.T, client kubernetes.Interface, ns string, role *rbacv1.Role) string {
	t.Helper()
	_, err := client.RbacV1().Roles(ns).Create(ctx(t), role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.CoreV1().ServiceAccounts(ns).Create(ctx(t), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: role.Name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.RbacV1().RoleBindings(ns).Create(ctx(t), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: role.Name, Namespace: ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tok, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx(t), role.Name, &authv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	kubeconfig, err := cluster.KubeconfigFor(t.TempDir(), tok.Status.Token)
	require.NoError(t, err)
	return kubeconfig
}

// waveStatus runs `wave status -o json` and checks that the table lists the same workloads.
func waveStatus(t *testing.T, kubeconfig, ns string) []WorkloadStatus {
	t.Helper()
	var rows []WorkloadStatus
	require.Eventually(t, func() bool { // RBAC takes a moment to reach the authorizer's cache
		out, err := exec.Command(waveBin, "status", "--kubeconfig="+kubeconfig, "-n", ns, "-o", "json").Output()
		return err == nil && json.Unmarshal(out, &rows) == nil
	}, eventually, 100*time.Millisecond)
	table, err := exec.Command(waveBin, "status", "--kubeconfig="+kubeconfig, "--namespaces="+ns).CombinedOutput()
	require.NoError(t, err, string(table))
	lines := strings.Split(strings.TrimSpace(string(table)), "\n")
	require.Len(t, lines, len(rows)+1, string(table))
	assert.Regexp(t, `^NAMESPACE +KIND +NAME +STATE +SINCE +CONFIG +DETAIL$`, lines[0])
	for i, r := range rows {
		assert.Contains(t, lines[i+1], string(r.State), "row %d", i)
		assert.Contains(t, lines[i+1], r.Name)
	}
	return rows
}

// wave status against the API: an opted-in workload that no wave has looked at says so, not
// "up to date"; given wave's filters, one they leave out says which.
func TestWaveStatusNotRecordedAndFilteredOut(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createDeployment(t, client, optIn(testcluster.Deployment(ns, "unseen", 1)))
	run := func(args ...string) []WorkloadStatus {
		t.Helper()
		out, err := exec.Command(waveBin, append([]string{"status", "--kubeconfig=" + cluster.Kubeconfig(), "-n", ns, "-o", "json"}, args...)...).Output()
		require.NoError(t, err, string(out))
		var rows []WorkloadStatus
		require.NoError(t, json.Unmarshal(out, &rows), string(out))
		require.Len(t, rows, 1)
		return rows
	}
	row := run()[0]
	assert.Equal(t, rolloutrecord.NotRecorded, row.State)
	assert.Contains(t, row.Reason, "check that wave runs and watches namespace "+ns)
	row = run("--label-selector=team=payments")[0]
	assert.Equal(t, rolloutrecord.FilteredOut, row.State)
	assert.Equal(t, "its labels do not match --label-selector=team=payments", row.Reason)
}
