package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcerts"
	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
)

var (
	certificates    = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	externalSecrets = schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1", Resource: "externalsecrets"}
)

// A Secret that cert-manager or External Secrets writes rolls only once its writer's status
// says it is done. Neither controller is built here (internal/testenv/testcluster/crds): the
// test serves their real CRDs and writes the Secret and the status in the order, and with the
// fields, each controller writes them. cert-manager renews: Issuing True (its trigger
// controller), the Secret updated whole (its issuing controller), Issuing taken away. External
// Secrets, after a user changed the ExternalSecret's spec: the Secret updated, then the status
// that names the spec's generation as synced (its markAsDone). Between the two, nothing rolls
// and a ConfigSourceIncomplete Warning names the writer and why; once the status says done, one
// rollout. A refresh of an ExternalSecret whose spec is unchanged rolls at once. A writer that
// never says done is waited for --source-ready-timeout, then rolled all the same, saying so.
func TestRolloutWaitsForTheSecretsWriter(t *testing.T) {
	client := adminClient(t)
	testcluster.InstallSecretWriterCRDs(t, cluster)
	dyn, err := dynamic.NewForConfig(cluster.Config())
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		writer  schema.GroupVersionResource
		timeout string
		done    bool // the writer's status says done
		says    string
		off     bool // --wait-for-secret-writers=false
		restart bool // wave restarted during the wait
	}{
		{"cert-manager renews the certificate", certificates, "1h", true, "certificate/web says its issuance is under way (Issuing: Renewing)", false, false},
		{"External Secrets syncs a changed spec", externalSecrets, "1h", true, "externalsecret/web says it has synced its spec of generation 1, not the current 2 yet", false, false},
		{"the Certificate never says done: rolls after the timeout, saying so", certificates, "3s", false, "certificate/web says its issuance is under way", false, false},
		{"--wait-for-secret-writers=false: rolls at the Secret's write, as the peers do", certificates, "1h", false, "", true, false},
		{"wave restarted during a renewal: the new one waits on, from when the first began, and says it once", certificates, "1h", true, "certificate/web says its issuance is under way (Issuing: Renewing)", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := testcluster.Namespace(t, client)
			w := writerScenario{t: t, client: client, writers: dyn.Resource(tc.writer).Namespace(ns), ns: ns}
			if tc.writer == certificates {
				w.createCertificate()
			} else {
				w.createExternalSecret()
			}
			createDeployment(t, client, deployment(ns, "app", withVolume(corev1.Volume{Name: "web",
				VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "web"}}})))
			args := []string{"--coalesce=0", "--source-ready-timeout=" + tc.timeout}
			if tc.off {
				args = append(args, "--wait-for-secret-writers=false")
			}
			p := startWave(t, ns, args...)
			before := inputsHash(waitRecorded(t, client, ns, "app"))
			settle(t, p)

			if tc.writer == externalSecrets {
				// A scheduled refresh, the spec unchanged: the status names the current spec
				// already, so the new value rolls at once.
				w.writeSecret(map[string][]byte{"password": []byte("second-password")})
				w.setSynced(1)
				before = inputsHash(waitTemplateHashChange(t, client, ns, "app", before))
				settle(t, p)
				assert.Zero(t, eventCount(t, client, ns, "app", "ConfigSourceIncomplete"), "a refresh of the current spec is done when written")
				// The user changes the spec; External Secrets writes the Secret, then its status.
				w.changeSpec()
				w.writeSecret(map[string][]byte{"password": []byte("third-password")})
			} else {
				w.setCertificateStatus(true)
				crt, key := testcerts.SelfSigned(t, "web")
				w.writeSecret(map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key})
			}
			if tc.off {
				waitTemplateHashChange(t, client, ns, "app", before)
				settle(t, p)
				assert.Zero(t, eventCount(t, client, ns, "app", "ConfigSourceIncomplete"), "no wait")
				assert.NotContains(t, p.Log(), "certificates.cert-manager.io", "Certificates not read")
				return
			}
			require.Eventually(t, func() bool { return eventCount(t, client, ns, "app", "ConfigSourceIncomplete") >= 1 }, eventually, tick, "said on the workload")
			said := events(t, client, ns, "app", "ConfigSourceIncomplete")[0]
			assert.Contains(t, said.Message, "secret/web: "+tc.says)
			assert.NotContains(t, said.Message, "password", "no value, nor a provider's message")
			if tc.done {
				assert.Equal(t, before, inputsHash(getDeployment(t, client, ns, "app")), "nothing rolled before the writer said done")
				assert.Contains(t, getDeployment(t, client, ns, "app").Annotations[rolloutrecord.Annotation], `"incompleteSince"`)
				if tc.restart {
					since := incompleteSince(t, client, ns, "app")
					p.Stop(15 * time.Second)
					p = startWave(t, ns, args...)
					require.Eventually(t, func() bool { return p.Metric(`configwave_wave_reconciles_total{result="incomplete"}`) >= 1 }, eventually, tick, "the new wave looked, and waits")
					assert.Equal(t, before, inputsHash(getDeployment(t, client, ns, "app")), "nothing rolled across the restart")
					assert.Equal(t, since, incompleteSince(t, client, ns, "app"), "the wait counts from the first wave's start of it")
				}
				if tc.writer == certificates {
					w.setCertificateStatus(false)
				} else {
					w.setSynced(2)
				}
			}
			waitTemplateHashChange(t, client, ns, "app", before)
			settle(t, p)
			if tc.done {
				assert.Equal(t, 1, eventCount(t, client, ns, "app", "ConfigSourceIncomplete"), "said once")
				assert.NotContains(t, getDeployment(t, client, ns, "app").Annotations[rolloutrecord.Annotation], `"incompleteSince"`, "the wait is over")
				return
			}
			require.Eventually(t, func() bool {
				for _, e := range events(t, client, ns, "app", "ConfigSourceIncomplete") {
					if strings.Contains(e.Message, "rolled with secret/web: certificate/web says") {
						return true
					}
				}
				return false
			}, eventually, tick, "the rollout past the timeout says what it rolled with")
		})
	}
}

// incompleteSince is when wave began waiting for a source of the Deployment, from its record.
func incompleteSince(t *testing.T, client kubernetes.Interface, ns, name string) time.Time {
	t.Helper()
	rec, err := rolloutrecord.ParseRecord(getDeployment(t, client, ns, name).Annotations[rolloutrecord.Annotation])
	require.NoError(t, err)
	require.False(t, rec.IncompleteSince.IsZero(), "waiting")
	return rec.IncompleteSince
}

// writerScenario writes a writer (named web, writing the Secret web) and its Secret as its
// controller does.
type writerScenario struct {
	t       *testing.T
	client  kubernetes.Interface
	writers dynamic.ResourceInterface
	ns      string
}

func (w writerScenario) create(obj map[string]any) {
	w.t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	u.SetName("web")
	_, err := w.writers.Create(ctx(w.t), u, metav1.CreateOptions{})
	require.NoError(w.t, err)
}

func (w writerScenario) updateStatus(mutate func(u *unstructured.Unstructured)) {
	w.t.Helper()
	u, err := w.writers.Get(ctx(w.t), "web", metav1.GetOptions{})
	require.NoError(w.t, err)
	mutate(u)
	_, err = w.writers.UpdateStatus(ctx(w.t), u, metav1.UpdateOptions{})
	require.NoError(w.t, err)
}

func (w writerScenario) writeSecret(data map[string][]byte) {
	w.t.Helper()
	s, err := w.client.CoreV1().Secrets(w.ns).Get(ctx(w.t), "web", metav1.GetOptions{})
	require.NoError(w.t, err)
	s.Data = data
	_, err = w.client.CoreV1().Secrets(w.ns).Update(ctx(w.t), s, metav1.UpdateOptions{})
	require.NoError(w.t, err)
}

// condition is one status condition; generation 0 leaves observedGeneration out, as External
// Secrets' conditions have none.
func condition(typ, status, reason, message string, generation int64) map[string]any {
	c := map[string]any{"type": typ, "status": status, "reason": reason, "message": message,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	if generation > 0 {
		c["observedGeneration"] = generation
	}
	return c
}

// createCertificate: an issued Certificate, as cert-manager leaves it (Ready, revision 1), and
// its Secret, with the annotations cert-manager puts on it.
func (w writerScenario) createCertificate() {
	w.t.Helper()
	w.create(map[string]any{"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
		"spec": map[string]any{"secretName": "web", "dnsNames": []any{"web"}, "issuerRef": map[string]any{"name": "selfsigned", "kind": "Issuer"}}})
	w.updateStatus(func(u *unstructured.Unstructured) {
		u.Object["status"] = map[string]any{"revision": int64(1), "notAfter": time.Now().Add(90 * 24 * time.Hour).UTC().Format(time.RFC3339),
			"conditions": []any{condition("Ready", "True", "Ready", "Certificate is up to date and has not expired", 1)}}
	})
	crt, key := testcerts.SelfSigned(w.t, "web")
	_, err := w.client.CoreV1().Secrets(w.ns).Create(ctx(w.t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web",
		Annotations: map[string]string{"cert-manager.io/certificate-name": "web", "cert-manager.io/issuer-name": "selfsigned", "cert-manager.io/issuer-kind": "Issuer", "cert-manager.io/common-name": "", "cert-manager.io/alt-names": "web"}},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}, metav1.CreateOptions{})
	require.NoError(w.t, err)
}

// setCertificateStatus: renewing adds Issuing (cert-manager's trigger controller, with Ready
// left as it was); issued takes it away and counts the revision (its issuing controller).
func (w writerScenario) setCertificateStatus(renewing bool) {
	w.t.Helper()
	w.updateStatus(func(u *unstructured.Unstructured) {
		ready := condition("Ready", "True", "Ready", "Certificate is up to date and has not expired", 1)
		conds := []any{ready}
		if renewing {
			conds = append(conds, condition("Issuing", "True", "Renewing", "Renewing certificate as renewal was scheduled at "+time.Now().UTC().Format(time.RFC3339), 1))
		} else {
			_ = unstructured.SetNestedField(u.Object, int64(2), "status", "revision")
		}
		_ = unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")
	})
}

// createExternalSecret: a synced ExternalSecret, as External Secrets leaves it, and the Secret
// it made, with its labels and annotation.
func (w writerScenario) createExternalSecret() {
	w.t.Helper()
	w.create(map[string]any{"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
		"spec": map[string]any{"refreshInterval": "1h", "secretStoreRef": map[string]any{"name": "vault", "kind": "SecretStore"},
			"target": map[string]any{"name": "web"},
			"data":   []any{map[string]any{"secretKey": "password", "remoteRef": map[string]any{"key": "app/db", "property": "password", "version": "1"}}}}})
	w.setSynced(1)
	_, err := w.client.CoreV1().Secrets(w.ns).Create(ctx(w.t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web",
		Labels:      map[string]string{"reconcile.external-secrets.io/managed": "true"},
		Annotations: map[string]string{"reconcile.external-secrets.io/data-hash": "0123456789abcdef0123456789abcdef0123456789abcdef01234567"}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte("first-password")}}, metav1.CreateOptions{})
	require.NoError(w.t, err)
}

// changeSpec is the user's edit: another version of the remote key (generation 2).
func (w writerScenario) changeSpec() {
	w.t.Helper()
	u, err := w.writers.Get(ctx(w.t), "web", metav1.GetOptions{})
	require.NoError(w.t, err)
	require.NoError(w.t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{"secretKey": "password",
		"remoteRef": map[string]any{"key": "app/db", "property": "password", "version": "2"}}}, "spec", "data"))
	_, err = w.writers.Update(ctx(w.t), u, metav1.UpdateOptions{})
	require.NoError(w.t, err)
}

// setSynced is External Secrets' markAsDone after a sync of the spec of generation gen: Ready
// (SecretSynced), refreshTime, syncedResourceVersion "GENERATION-HASH", the binding.
func (w writerScenario) setSynced(gen int64) {
	w.t.Helper()
	w.updateStatus(func(u *unstructured.Unstructured) {
		require.Equal(w.t, gen, u.GetGeneration(), "the status names the spec it synced")
		u.Object["status"] = map[string]any{"refreshTime": time.Now().UTC().Format(time.RFC3339),
			"syncedResourceVersion": strconv.FormatInt(gen, 10) + "-5d41402abc4b2a76b9719d911017c592",
			"binding":               map[string]any{"name": "web"},
			"conditions":            []any{condition("Ready", "True", "SecretSynced", "secret synced", 0)}}
	})
}
