package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// With the chart's rbac.clusterWide=false, wave runs on the Role the chart puts in each
// namespace it manages, and nothing cluster-wide: it records, rolls and reports there. It makes
// its install key on first start, on the Role the chart gives it for that in its own namespace
// (here the same one).
func TestRunsWithTheChartsNamespacedRole(t *testing.T) {
	helmBin := testcluster.Helm(t)
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	out, err := exec.Command(helmBin, "template", "x", filepath.Join("..", "..", "charts", "configwave"), "--namespace", ns,
		"--set", "rbac.clusterWide=false", "--set", "namespaces={"+ns+"}", "--set", "leaderElection.enabled=false", "--set", "replicaCount=1",
		"--set", "podDisruptionBudget.enabled=false").CombinedOutput()
	require.NoError(t, err, string(out))
	role := &rbacv1.Role{}
	keySecret := ""
	for _, doc := range strings.Split(string(out), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			continue // a comment-only document
		}
		if r, ok := obj.(*rbacv1.Role); ok && r.Namespace == ns {
			role.Rules = append(role.Rules, r.Rules...) // the namespace's Role and the install key's
			if strings.HasSuffix(r.Name, "-install-key") {
				keySecret = r.Name
			}
		}
	}
	require.NotEmpty(t, role.Rules, "the chart renders a Role in the managed namespace")
	require.NotEmpty(t, keySecret, "and one for the install key")
	assert.Contains(t, string(out), "--install-key-secret="+keySecret)
	role.Name = "wave"
	kubeconfig := roleKubeconfig(t, client, ns, role)

	createCM(t, client, ns, "cm", map[string]string{"a": "1"})
	createDeployment(t, client, deployment(ns, "app", withEnvKey("cm", "a")))
	var p *testcluster.Process
	require.Eventually(t, func() bool { // RBAC reaches the authorizer's cache in a moment
		p = startWave(t, ns, "--kubeconfig="+kubeconfig, "--install-key-secret="+ns+"/"+keySecret)
		if !strings.Contains(p.Log(), "forbidden") {
			return true
		}
		p.Stop(15 * time.Second)
		return false
	}, eventually, 500*time.Millisecond)
	before := waitRecorded(t, client, ns, "app")
	patchCM(t, client, ns, "cm", `{"data":{"a":"2"}}`)
	waitTemplateHashChange(t, client, ns, "app", inputsHash(before))
	require.Eventually(t, func() bool { return len(events(t, client, ns, "app", "ConfigRolledOut")) > 0 }, eventually, tick, "Events and the rollout's outcome too")
	assert.NotContains(t, p.Log(), "forbidden")
	key, err := client.CoreV1().Secrets(ns).Get(ctx(t), keySecret, metav1.GetOptions{})
	require.NoError(t, err, "wave made its install key")
	assert.Len(t, key.Data["key"], 32)
	p.Stop(15 * time.Second)

	// Stakater Reloader's --namespace-selector needs every namespace's labels: on this Role it
	// stops at once, saying what to grant, instead of never becoming ready.
	sel, ready := tryStartWave(t, ns, "--kubeconfig="+kubeconfig, "--install-key-secret=", "--namespace-selector=team=a")
	require.False(t, ready)
	assert.NotZero(t, sel.Wait(t, 5*time.Second))
	assert.Contains(t, sel.Log(), "grant list and watch on namespaces at cluster scope")
}
