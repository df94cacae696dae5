package webhookcert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

var names = []string{"configwave-wave-webhook.configwave-system.svc", "configwave-wave-webhook.configwave-system.svc.cluster.local"}

func leaf(t *testing.T, data map[string][]byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(data[corev1.TLSCertKey])
	require.NotNil(t, b)
	c, err := x509.ParseCertificate(b.Bytes)
	require.NoError(t, err)
	return c
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	fresh, err := Make(NewAll, nil, names, now)
	require.NoError(t, err)
	otherCA, err := Make(NewAll, nil, names, now)
	require.NoError(t, err)
	with := func(changes map[string][]byte) map[string][]byte {
		out := map[string][]byte{}
		for k, v := range fresh {
			out[k] = v
		}
		for k, v := range changes {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		data   map[string][]byte
		at     time.Time
		dns    []string
		want   Action
		whyHas string
	}{
		{"none yet", nil, now, names, NewAll, "no usable CA"},
		{"just made", fresh, now, names, Keep, ""},
		{"eleven months on", fresh, now.Add(330 * 24 * time.Hour), names, Keep, ""},
		{"a month before the serving certificate ends", fresh, now.Add(ServingValidity - 29*24*time.Hour), names, NewServing, "its serving certificate expires"},
		{"a year before the CA ends", fresh, now.Add(CAValidity - 364*24*time.Hour), names, NewAll, "its CA expires"},
		{"another Service name", fresh, now, []string{"other.configwave-system.svc"}, NewServing, "does not serve other.configwave-system.svc"},
		{"a serving certificate of another CA", with(map[string][]byte{corev1.TLSCertKey: otherCA[corev1.TLSCertKey], corev1.TLSPrivateKeyKey: otherCA[corev1.TLSPrivateKeyKey]}), now, names, NewServing, "under its CA"},
		{"a serving key that is not its certificate's", with(map[string][]byte{corev1.TLSPrivateKeyKey: otherCA[corev1.TLSPrivateKeyKey]}), now, names, NewServing, "no usable serving certificate"},
		{"a CA key that is not its certificate's", with(map[string][]byte{CAKeyKey: otherCA[CAKeyKey]}), now, names, NewAll, "no usable CA"},
		{"a CA that is a serving certificate", with(map[string][]byte{CACertKey: fresh[corev1.TLSCertKey], CAKeyKey: fresh[corev1.TLSPrivateKeyKey]}), now, names, NewAll, "not a CA"},
		{"garbage", map[string][]byte{CACertKey: []byte("x"), CAKeyKey: []byte("y")}, now, names, NewAll, "no usable CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := Decide(tc.data, tc.dns, tc.at)
			assert.Equal(t, tc.want, got)
			assert.Contains(t, why, tc.whyHas)
			if got == Keep {
				return
			}
			data, err := Make(got, tc.data, tc.dns, tc.at)
			require.NoError(t, err)
			again, why := Decide(data, tc.dns, tc.at)
			assert.Equal(t, Keep, again, "what Make made needs nothing more: %s", why)
			if got == NewServing {
				assert.Equal(t, tc.data[CACertKey], data[CACertKey], "a new serving certificate keeps the CA the API server trusts")
			}
			assert.Equal(t, tc.dns, leaf(t, data).DNSNames)
		})
	}
}

// The certificate a replica serves is the Secret's: made once by the first replica, taken by
// the second, and the CA put in every webhook of the configuration.
func TestKeeperMakesOneCertificateForEveryReplica(t *testing.T) {
	client := fake.NewSimpleClientset(&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "configwave-wave-revisions"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "pods.revisions.configwave.io"}}})
	keeper := func() *Keeper {
		return &Keeper{Client: waveclienttest.Wrap(client), Namespace: "configwave-system", Name: "configwave-wave-webhook-cert", Configuration: "configwave-wave-revisions", DNSNames: names}
	}
	a, b := keeper(), keeper()
	_, err := a.TLSConfig().GetCertificate(nil)
	assert.ErrorContains(t, err, "not made yet (Secret configwave-system/configwave-wave-webhook-cert)")
	require.NoError(t, a.Sync(context.Background()))
	require.NoError(t, b.Sync(context.Background()))
	ca, cb := served(t, a), served(t, b)
	assert.Equal(t, ca.Raw, cb.Raw, "both replicas serve the one certificate")
	s, err := client.CoreV1().Secrets("configwave-system").Get(context.Background(), "configwave-wave-webhook-cert", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.SecretTypeTLS, s.Type)
	c, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), "configwave-wave-revisions", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, s.Data[CACertKey], c.Webhooks[0].ClientConfig.CABundle)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(c.Webhooks[0].ClientConfig.CABundle))
	_, err = ca.Verify(x509.VerifyOptions{Roots: roots, DNSName: names[0]})
	assert.NoError(t, err, "the API server, trusting the caBundle, trusts what is served")

	// A GitOps sync that empties the caBundle is undone at the next look; nothing else written.
	c.Webhooks[0].ClientConfig.CABundle = nil
	_, err = client.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(context.Background(), c, metav1.UpdateOptions{})
	require.NoError(t, err)
	client.ClearActions()
	require.NoError(t, b.Sync(context.Background()))
	c, err = client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), "configwave-wave-revisions", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, s.Data[CACertKey], c.Webhooks[0].ClientConfig.CABundle)
	for _, act := range client.Actions() {
		assert.False(t, act.GetVerb() != "get" && act.GetResource().Resource == "secrets", "the Secret is left as it is: %v", act)
	}
}

// Near its end, the serving certificate is renewed under the same CA, so the caBundle stays;
// an update that meets another writer's (409) reads the Secret again and decides again.
func TestKeeperRenewsUnderTheSameCA(t *testing.T) {
	client := fake.NewSimpleClientset()
	now := time.Now()
	k := &Keeper{Client: waveclienttest.Wrap(client), Namespace: "ns", Name: "cert", DNSNames: names, Now: func() time.Time { return now }}
	require.NoError(t, k.Sync(context.Background()))
	first := served(t, k)
	before, err := client.CoreV1().Secrets("ns").Get(context.Background(), "cert", metav1.GetOptions{})
	require.NoError(t, err)

	now = now.Add(ServingValidity - 10*24*time.Hour)
	conflicts := 1
	client.PrependReactor("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, errConflict()
		}
		return false, nil, nil
	})
	require.NoError(t, k.Sync(context.Background()))
	after, err := client.CoreV1().Secrets("ns").Get(context.Background(), "cert", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before.Data[CACertKey], after.Data[CACertKey], "the CA the API server trusts is kept")
	assert.NotEqual(t, before.Data[corev1.TLSCertKey], after.Data[corev1.TLSCertKey])
	assert.NotEqual(t, first.Raw, served(t, k).Raw, "the renewed certificate is served")
	assert.True(t, served(t, k).NotAfter.After(now.Add(300*24*time.Hour)))
}

func served(t *testing.T, k *Keeper) *x509.Certificate {
	t.Helper()
	c, err := k.TLSConfig().GetCertificate(&tls.ClientHelloInfo{})
	require.NoError(t, err)
	x, err := x509.ParseCertificate(c.Certificate[0])
	require.NoError(t, err)
	return x
}

func errConflict() error {
	return apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, "cert", errors.New("changed meanwhile"))
}

// A new CA keeps the one before in the bundle while it is valid, so that a replica still
// serving a certificate under it is trusted until it reads the Secret again; a new serving
// certificate keeps both.
func TestANewCAKeepsTheOldOneInTheBundle(t *testing.T) {
	now := time.Now()
	first, err := Make(NewAll, nil, names, now)
	require.NoError(t, err)
	assert.Empty(t, first[PreviousCACertKey], "nothing before the first")
	assert.Equal(t, first[CACertKey], Bundle(first, now))
	later := now.Add(CAValidity - 300*24*time.Hour)
	// What a replica serves under the old CA by then: a serving certificate renewed under it.
	stillOld, err := Make(NewServing, first, names, later.Add(-48*time.Hour))
	require.NoError(t, err)
	second, err := Make(NewAll, stillOld, names, later)
	require.NoError(t, err)
	assert.Equal(t, first[CACertKey], second[PreviousCACertKey])
	bundle := Bundle(second, later)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(bundle))
	for _, data := range []map[string][]byte{stillOld, second} {
		_, err := leaf(t, data).Verify(x509.VerifyOptions{Roots: roots, DNSName: names[0], CurrentTime: later.Add(-time.Hour)})
		assert.NoError(t, err, "both the old replica's certificate and the new one's are trusted")
	}
	renewed, err := Make(NewServing, second, names, later)
	require.NoError(t, err)
	assert.Equal(t, bundle, Bundle(renewed, later), "a new serving certificate changes no CA")
	assert.Equal(t, second[CACertKey], Bundle(second, now.Add(CAValidity+time.Hour)), "the old CA leaves the bundle once it has expired")
}

// The registration may come after wave (Helm creates it after the Deployment): the
// certificate is served all the same, and the error says what is missing.
func TestKeeperServesBeforeTheRegistrationExists(t *testing.T) {
	client := fake.NewSimpleClientset()
	k := &Keeper{Client: waveclienttest.Wrap(client), Namespace: "ns", Name: "cert", Configuration: "configwave-wave-revisions", DNSNames: names}
	err := k.Sync(context.Background())
	require.ErrorIs(t, err, ErrRegistration)
	assert.ErrorContains(t, err, "MutatingWebhookConfiguration configwave-wave-revisions is not there (yet)")
	served(t, k)
}

// Run looks again every Every: a caBundle emptied by a sync from Git is put back without a
// restart.
func TestKeeperRunPutsTheCABack(t *testing.T) {
	client := fake.NewSimpleClientset(&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "reg"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "pods.revisions.configwave.io"}}})
	k := &Keeper{Client: waveclienttest.Wrap(client), Namespace: "ns", Name: "cert", Configuration: "reg", DNSNames: names, Every: 20 * time.Millisecond}
	require.NoError(t, k.Sync(context.Background()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { k.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	regs := client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	c, err := regs.Get(context.Background(), "reg", metav1.GetOptions{})
	require.NoError(t, err)
	c.Webhooks[0].ClientConfig.CABundle = nil
	_, err = regs.Update(context.Background(), c, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Eventually(t, func() bool {
		c, err := regs.Get(context.Background(), "reg", metav1.GetOptions{})
		return err == nil && len(c.Webhooks[0].ClientConfig.CABundle) > 0
	}, 5*time.Second, 10*time.Millisecond, "the caBundle is put back by the next look")
}

// A certificate under a new CA is served only once the registration's caBundle carries that
// CA: served before, the API server would refuse every call until the bundle caught up. A
// certificate renewed under the same CA is served at once.
func TestKeeperServesANewCAOnlyOnceTheBundleHasIt(t *testing.T) {
	client := fake.NewSimpleClientset(&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "reg"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "pods.revisions.configwave.io"}}})
	now := time.Now()
	var trusted []bool
	k := &Keeper{Client: waveclienttest.Wrap(client), Namespace: "ns", Name: "cert", Configuration: "reg", DNSNames: names,
		Now: func() time.Time { return now }, Trusted: func(ok bool) { trusted = append(trusted, ok) }}
	require.NoError(t, k.Sync(context.Background()))
	first := served(t, k)

	refuse := true
	client.PrependReactor("update", "mutatingwebhookconfigurations", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuse {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}, "reg", errors.New("no"))
		}
		return false, nil, nil
	})
	// A new CA is due (its key lost here; a CA near its end alike) while the served
	// certificate is still valid.
	s, err := client.CoreV1().Secrets("ns").Get(context.Background(), "cert", metav1.GetOptions{})
	require.NoError(t, err)
	delete(s.Data, CAKeyKey)
	_, err = client.CoreV1().Secrets("ns").Update(context.Background(), s, metav1.UpdateOptions{})
	require.NoError(t, err)
	err = k.Sync(context.Background())
	require.ErrorIs(t, err, ErrRegistration)
	assert.Equal(t, first.Raw, served(t, k).Raw, "the new CA's certificate waits while the bundle lacks its CA")
	s, err = client.CoreV1().Secrets("ns").Get(context.Background(), "cert", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, first.Raw, leaf(t, s.Data).Raw, "the Secret has the new CA's certificate")

	refuse = false
	require.NoError(t, k.Sync(context.Background()))
	assert.Equal(t, leaf(t, s.Data).Raw, served(t, k).Raw, "served once the bundle carries its CA")
	assert.Equal(t, []bool{true, false, true}, trusted)
}

func TestServeAtOnce(t *testing.T) {
	now := time.Now()
	pair := func(data map[string][]byte) *tls.Certificate {
		c, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
		require.NoError(t, err)
		return &c
	}
	first, err := Make(NewAll, nil, names, now)
	require.NoError(t, err)
	renewed, err := Make(NewServing, first, names, now.Add(time.Hour))
	require.NoError(t, err)
	newCA, err := Make(NewAll, first, names, now.Add(time.Hour))
	require.NoError(t, err)
	for _, tc := range []struct {
		name         string
		served, next *tls.Certificate
		at           time.Time
		want         bool
	}{
		{"nothing served yet (just restarted)", nil, pair(first), now, true},
		{"renewed under the same CA", pair(first), pair(renewed), now, true},
		{"under a new CA", pair(first), pair(newCA), now, false},
		{"under a new CA, the one served expired", pair(first), pair(newCA), now.Add(ServingValidity + time.Hour), true},
		{"no leaf parsed (GODEBUG x509keypairleaf=0)", &tls.Certificate{}, pair(newCA), now, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, ServeAtOnce(tc.served, tc.next, tc.at))
		})
	}
}
