package main

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/webhookcert"
)

// With --revisions-webhook-cert-secret, wave makes the webhook's CA and certificate itself (no
// cert-manager), once for every replica, and puts the CA in the webhook's registration: a TLS
// client that trusts that caBundle and asks for the Service's name, as the API server does,
// accepts what each replica serves, and an emptied caBundle is put back.
func TestRevisionsWebhookCertificateMadeByWave(t *testing.T) {
	testcluster.Need(t, cluster)
	client := adminClient(t)
	ns := testcluster.Namespace(t, client)
	registerRevisionWebhook(t, client, ns, "https://127.0.0.1:1/mutate-pods", nil)
	name := "configwave-revisions-" + ns
	args := func(addr string) []string {
		return []string{"--revisions-webhook-address=" + addr, "--revisions-webhook-cert-secret=" + ns + "/webhook-cert",
			"--revisions-webhook-service=configwave-wave-webhook", "--revisions-webhook-configuration=" + name}
	}
	first, second := testcluster.FreeAddr(t), testcluster.FreeAddr(t)
	w := startWave(t, ns, args(first)...)
	startWave(t, ns, args(second)...)
	assert.Equal(t, 1.0, w.Metric("configwave_wave_revisions_webhook_ca_trusted"), "the registration carries the CA served")

	mwc, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx(t), name, metav1.GetOptions{})
	require.NoError(t, err)
	secret, err := client.CoreV1().Secrets(ns).Get(ctx(t), "webhook-cert", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, mwc.Webhooks[0].ClientConfig.CABundle, "the caBundle is set before wave is ready")
	assert.Equal(t, secret.Data[webhookcert.CACertKey], mwc.Webhooks[0].ClientConfig.CABundle)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(mwc.Webhooks[0].ClientConfig.CABundle))
	served := func(addr string) []byte {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "configwave-wave-webhook." + ns + ".svc"})
		require.NoError(t, err, "the API server's TLS client would refuse %s", addr)
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Raw
	}
	assert.Equal(t, served(first), served(second), "both replicas serve the one certificate")
	_, err = tls.Dial("tcp", first, &tls.Config{RootCAs: roots, ServerName: "other." + ns + ".svc"})
	assert.Error(t, err, "made for the Service's name only")

	// A sync from Git that empties the caBundle: put back at wave's next look. (Its period is
	// 5 minutes; a restart looks at once.)
	mwc.Webhooks[0].ClientConfig.CABundle = nil
	_, err = client.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx(t), mwc, metav1.UpdateOptions{})
	require.NoError(t, err)
	startWave(t, ns, args(testcluster.FreeAddr(t))...)
	require.Eventually(t, func() bool {
		m, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx(t), name, metav1.GetOptions{})
		return err == nil && string(m.Webhooks[0].ClientConfig.CABundle) == string(secret.Data[webhookcert.CACertKey])
	}, 30*time.Second, tick, "the caBundle was not put back")
	again, err := client.CoreV1().Secrets(ns).Get(ctx(t), "webhook-cert", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, secret.ResourceVersion, again.ResourceVersion, "the certificate is made once")
}
