package onefirst

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/configwave/configwave/internal/reloader/coreclient"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWorkloadOf(t *testing.T) {
	for _, tc := range []struct {
		name, kind, owner string
		labels            map[string]string
		wantKind, want    string
	}{
		{"a Deployment's ReplicaSet", "ReplicaSet", "web-7d9f8c6b5", map[string]string{"pod-template-hash": "7d9f8c6b5"}, "Deployment", "web"},
		{"an Argo Rollout's ReplicaSet", "ReplicaSet", "web-6c8d7f5b4", map[string]string{"rollouts-pod-template-hash": "6c8d7f5b4"}, "Rollout", "web"},
		{"a bare ReplicaSet", "ReplicaSet", "web", nil, "ReplicaSet", "web"},
		{"a hash that is not the name's end", "ReplicaSet", "web-abc", map[string]string{"pod-template-hash": "xyz"}, "ReplicaSet", "web-abc"},
		{"a StatefulSet", "StatefulSet", "db", map[string]string{"controller-revision-hash": "db-5f"}, "StatefulSet", "db"},
		{"a DaemonSet", "DaemonSet", "agent", nil, "DaemonSet", "agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, name := WorkloadOf(tc.kind, tc.owner, tc.labels)
			assert.Equal(t, []string{tc.wantKind, tc.want}, []string{kind, name})
		})
	}
}

func TestMaxUnavailable(t *testing.T) {
	for _, tc := range []struct {
		value    string
		replicas int
		want     int
		err      bool
	}{
		{"1", 4, 1, false}, {"3", 4, 3, false}, {"25%", 4, 1, false}, {"25%", 10, 2, false},
		{"10%", 4, 1, false}, {"100%", 10, 10, false},
		{"0", 4, 0, true}, {"-1", 4, 0, true}, {"0%", 4, 0, true}, {"101%", 4, 0, true}, {"a", 4, 0, true}, {"%", 4, 0, true},
	} {
		t.Run(tc.value, func(t *testing.T) {
			n, err := MaxUnavailable(tc.value, tc.replicas)
			if tc.err {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "--rollout-max-unavailable=")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, n)
		})
	}
}

func TestLeaseName(t *testing.T) {
	a := LeaseName("Deployment", "web", []string{"configmap web/nginx"})
	assert.True(t, strings.HasPrefix(a, "configwave-deployment-web-"), a)
	assert.Equal(t, a, LeaseName("Deployment", "web", []string{"configmap web/nginx"}), "every sidecar of the workload names the same Lease")
	assert.NotEqual(t, a, LeaseName("Deployment", "web", []string{"secret web/tls"}), "one Lease per source")
	assert.Equal(t, LeaseName("Deployment", "web", []string{"secret web/tls", "configmap web/nginx"}),
		LeaseName("Deployment", "web", []string{"configmap web/nginx", "secret web/tls"}), "whatever the order of the flags")
	assert.Equal(t, "configwave-deployment-web-7525fbbf", LeaseName("Deployment", "web", []string{"configmap web/nginx"}), "pinned: a Role's resourceNames name it")
	long := LeaseName("StatefulSet", strings.Repeat("a", 253), nil)
	assert.LessOrEqual(t, len(long), 253)
}

func TestJudgeWarnings(t *testing.T) {
	probe := func(container, port string, period, threshold int32) Probe {
		return Probe{Container: container, HTTPPort: port, PeriodSeconds: period, FailureThreshold: threshold}
	}
	for _, tc := range []struct {
		name      string
		pod       Pod
		soak      time.Duration
		healthURL string
		want      []string // substrings, one a warning
	}{
		{name: "nothing judges the app", pod: Pod{}, soak: 30 * time.Second, want: []string{"nothing judges a new config"}},
		{name: "--health-url judges it", pod: Pod{}, soak: 30 * time.Second, healthURL: "http://localhost:8080/healthz"},
		{name: "a readiness gate judges it", pod: Pod{ReadinessGates: 1}, soak: 30 * time.Second},
		{name: "the reloader's own probe judges only the reloader", pod: Pod{Probes: []Probe{probe("reloader", "9533", 1, 1)}}, soak: 30 * time.Second,
			want: []string{"nothing judges a new config"}},
		{name: "a probe the soak outlasts", pod: Pod{Probes: []Probe{probe("app", "8080", 1, 3)}}, soak: 30 * time.Second},
		{name: "a soak shorter than the probe needs", pod: Pod{Probes: []Probe{probe("app", "http", 10, 3)}}, soak: 10 * time.Second,
			want: []string{"--rollout-soak=10s is shorter than container app's readiness probe needs", "give a soak of at least 30s"}},
		{name: "the API's defaults: 10 s × 3", pod: Pod{Probes: []Probe{probe("app", "", 0, 0)}}, soak: 29 * time.Second,
			want: []string{"periodSeconds 10 × failureThreshold 3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := JudgeWarnings(tc.pod, tc.soak, tc.healthURL, "9533")
			if len(tc.want) == 0 {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			for _, w := range tc.want {
				assert.Contains(t, got[0], w)
			}
		})
	}
}

// A probe on a named port counts as the reloader's own when that name is the reloader's port.
func TestReadPodResolvesANamedProbePort(t *testing.T) {
	raw := `{"metadata":{"name":"web-0"},"spec":{"containers":[
		{"name":"reloader","ports":[{"name":"metrics","containerPort":9533}],"readinessProbe":{"httpGet":{"port":"metrics"}}},
		{"name":"app","readinessProbe":{"periodSeconds":5,"httpGet":{"port":8080}}}]}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(raw)) }))
	defer srv.Close()
	client, err := coreclient.New(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	p, err := ReadPod(context.Background(), client, "web", "web-0")
	require.NoError(t, err)
	assert.Equal(t, []Probe{{Container: "reloader", HTTPPort: "9533"}, {Container: "app", HTTPPort: "8080", PeriodSeconds: 5}}, p.Probes)
	assert.Empty(t, JudgeWarnings(p, 30*time.Second, "", "9533"), "the app's probe judges it; the reloader's own is left out")
}
