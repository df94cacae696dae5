package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/reloader/coreclient"
	"github.com/configwave/configwave/internal/reloader/onefirst"
	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// pods shows where each pod stands in its reloader sidecars' one-first rollout, from the Lease
// the sidecars keep (written here through the sidecar's own LeaseStore): the first pod under
// trial, the others on the promoted config; then the config rejected, and why.
func TestPodsShowTheSidecarsOneFirstState(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	_, err := client.AppsV1().Deployments(ns).Create(ctx(t), testcluster.Deployment(ns, "web", 2), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, "web", time.Minute))
	pods, err := client.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 2)
	first, other := pods.Items[0].Name, pods.Items[1].Name

	rest, err := coreclient.New(cluster.Config())
	require.NoError(t, err)
	store := &onefirst.LeaseStore{Client: rest, Namespace: ns, Name: onefirst.LeaseName("Deployment", "web", []string{"app-config"}), Expiry: time.Minute}
	const tried, good = "bbbbbbbb22222222bbbbbbbb22222222", "aaaaaaaa11111111aaaaaaaa11111111"
	since := time.Now().Truncate(time.Second)
	require.NoError(t, store.Put(ctx(t), onefirst.Record{Content: tried, State: onefirst.Soaking, First: first, Since: since, Renewed: since, Good: good}, ""))

	sidecarOf := func() map[string]string {
		var v podsOut
		require.NoError(t, json.Unmarshal([]byte(run(t, "pods", "deploy/web", "-n", ns, "-o", "json")), &v))
		out := map[string]string{}
		for _, r := range v.Revisions {
			for _, p := range r.Pods {
				out[p.Name] = p.Sidecar
			}
		}
		return out
	}
	got := sidecarOf()
	assert.Equal(t, "under trial: tries config bbbbbbbb first, since "+since.UTC().Format(time.RFC3339), got[first])
	assert.Equal(t, "keeps config aaaaaaaa while pod "+first+" tries config bbbbbbbb first", got[other])
	table := run(t, "pods", "deploy/web", "-n", ns)
	assert.Contains(t, table, "sidecar: under trial: tries config bbbbbbbb first")

	// The first pod's app failed on it: rejected, and why, on every pod.
	_, version, err := store.Get(ctx(t))
	require.NoError(t, err)
	require.NoError(t, store.Put(ctx(t), onefirst.Record{Content: tried, State: onefirst.Rejected, First: first, Since: since, Renewed: since, Good: good,
		Reason: "the app's readiness failed 3 times"}, version))
	got = sidecarOf()
	assert.Equal(t, "rejected here: config bbbbbbbb failed (the app's readiness failed 3 times); back on config aaaaaaaa", got[first])
	assert.True(t, strings.HasPrefix(got[other], "rejected: config bbbbbbbb failed on pod "+first), got[other])
}
