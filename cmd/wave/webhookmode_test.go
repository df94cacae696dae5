package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rollout"
)

// Stakater Reloader's --webhook-url mode: every change of a ConfigMap's data is told to the
// webhook with Reloader's body, even one carrying the ignore annotation (Reloader's webhook
// mode never reads it), a change of metadata alone is not, and no workload is written or rolled.
func TestStakaterWebhookURLMode(t *testing.T) {
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	createCM(t, client, ns, "app-config", map[string]string{"a": "1"})
	createCM(t, client, ns, "annotated", map[string]string{"a": "1"})
	patchCM(t, client, ns, "annotated", `{"metadata":{"annotations":{"`+podrefs.StakaterIgnore+`":"true"}}}`)
	createDeployment(t, client, stakaterDeployment(ns, "app", map[string]string{podrefs.StakaterAuto: "true"}, withEnvFrom("app-config")))
	require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, "app", eventually))
	bodies := make(chan string, 10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- r.Header.Get("Content-Type") + " " + string(b)
	}))
	t.Cleanup(hook.Close)
	p := startWave(t, ns, "--webhook-url", hook.URL+"/hooks/reload")
	require.Eventually(t, func() bool { return p.Metric("configwave_wave_leader") == 1 }, eventually, tick, "the hook tells once it leads")
	next := func() string {
		select {
		case b := <-bodies:
			return b
		case <-time.After(eventually):
			t.Fatalf("no webhook request: %s", p.Log())
		}
		return ""
	}
	patchCM(t, client, ns, "app-config", `{"data":{"a":"2"}}`)
	assert.Equal(t, `application/json {"webhook":"update successful"}`, next())
	patchCM(t, client, ns, "app-config", `{"metadata":{"labels":{"x":"y"}}}`) // metadata only: nothing
	patchCM(t, client, ns, "annotated", `{"data":{"a":"2"}}`)                 // told although annotated, as Reloader does
	assert.Equal(t, `application/json {"webhook":"update successful"}`, next())
	select {
	case b := <-bodies:
		t.Fatalf("an extra request: %s", b)
	case <-time.After(300 * time.Millisecond):
	}
	d := getDeployment(t, client, ns, "app")
	assert.NotContains(t, d.Annotations, rollout.InputsAnnotation, "no workload is written")
	assert.Len(t, replicaSets(t, client, ns, "app"), 1, "nothing rolls")
	assert.Zero(t, p.Metric("configwave_wave_queue_depth"), "nothing is queued for a controller that does not run")
	assert.Equal(t, 1.0, p.Metric("configwave_wave_workloads_tracked"), "the opted-in workload is still counted")
	assert.Contains(t, p.Log(), "Stakater Reloader's --webhook-url")
}
