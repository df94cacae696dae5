package manifests_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/waveclient"
	"github.com/configwave/configwave/internal/wave/webhookcert"
)

// revisions.webhook.makeCertificate, applied for real: as wave's ServiceAccount, the
// certificate's Secret can be made and renewed and the webhook's caBundle set, although the
// revisions policy refuses wave any other Secret of its making that is not a snapshot, and RBAC
// any other webhook configuration.
func TestChartLetsWaveMakeTheWebhookCertificate(t *testing.T) {
	testcluster.Need(t, cluster)
	const release, ns = "certs", "certs-system"
	ensureNamespace(t, ns)
	out, err := helm(t, "template", release, filepath.Join(root, "charts", "configwave"), "--namespace", ns,
		"--set", "revisions.enabled=true", "--set", "revisions.webhook.makeCertificate=true")
	require.NoError(t, err)
	assert.NotContains(t, string(out), "--revisions-webhook-cert-dir", "nothing mounted")
	assert.NotContains(t, string(out), "caBundle:", "wave sets it")
	dyn, err := dynamic.NewForConfig(cluster.Config())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resources := map[string]string{"Role": "roles", "RoleBinding": "rolebindings", "ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
		"ValidatingAdmissionPolicy": "validatingadmissionpolicies", "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
		"MutatingWebhookConfiguration": "mutatingwebhookconfigurations"}
	for _, o := range decode(t, out) {
		res, ok := resources[o.GetKind()]
		if !ok {
			continue
		}
		if o.GetKind() == "MutatingWebhookConfiguration" {
			// No pod of the cluster's other tests is sent to a webhook that is not served here.
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			for _, h := range hooks {
				h.(map[string]any)["namespaceSelector"] = map[string]any{"matchLabels": map[string]any{"no-such-namespace": "true"}}
			}
			require.NoError(t, unstructured.SetNestedSlice(o.Object, hooks, "webhooks"))
		}
		ri := dyn.Resource(o.GroupVersionKind().GroupVersion().WithResource(res))
		var r dynamic.ResourceInterface = ri
		if o.GetNamespace() != "" {
			r = ri.Namespace(o.GetNamespace())
		}
		_, err := r.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "configwave-manifest-test", Force: true})
		require.NoError(t, err, "%s %s", o.GetKind(), o.GetName())
		t.Cleanup(func() { _ = r.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{}) })
	}
	asWave := rest.CopyConfig(cluster.Config())
	asWave.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + release + "-wave",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	wave, err := waveclient.New(asWave)
	require.NoError(t, err)
	dns := []string{release + "-wave-webhook." + ns + ".svc"}
	keeper := &webhookcert.Keeper{Client: wave, Namespace: ns, Name: release + "-wave-webhook-cert", Configuration: release + "-wave-revisions", DNSNames: dns}
	// RBAC and the policy reach the authorizer and admission a moment after they are made:
	// until the policy refuses wave a Secret of another name (a new name at each try), and
	// RBAC lets it make its own.
	probe := 0
	require.Eventually(t, func() bool {
		probe++
		other := &webhookcert.Keeper{Client: wave, Namespace: ns, Name: fmt.Sprintf("another-secret-%d", probe), DNSNames: dns}
		err := other.Sync(ctx)
		return err != nil && strings.Contains(err.Error(), "wave may create only immutable snapshots")
	}, time.Minute, 200*time.Millisecond, "the policy never refused wave a Secret that is not the webhook's certificate")
	admin, err := kubernetes.NewForConfig(cluster.Config())
	require.NoError(t, err)
	waveKube, err := kubernetes.NewForConfig(asWave)
	require.NoError(t, err)
	// The name let through is let through as a TLS Secret only: never as a token of a
	// ServiceAccount of wave's namespace, which wave could then read.
	_, err = waveKube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: release + "-wave-webhook-cert",
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: corev1.SecretTypeServiceAccountToken}, metav1.CreateOptions{})
	assert.ErrorContains(t, err, "wave may write its webhook's certificate only as a kubernetes.io/tls Secret")
	require.Eventually(t, func() bool { return keeper.Sync(ctx) == nil }, time.Minute, 200*time.Millisecond, "wave could not make the certificate")
	secret, err := admin.CoreV1().Secrets(ns).Get(ctx, release+"-wave-webhook-cert", metav1.GetOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = admin.CoreV1().Secrets(ns).Delete(context.Background(), secret.Name, metav1.DeleteOptions{})
	})
	mwc, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, release+"-wave-revisions", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, secret.Data[webhookcert.CACertKey], mwc.Webhooks[0].ClientConfig.CABundle)

	// wave may change its registration's caBundle only: not its failure policy (tried until the
	// policy is in force; a change let through before is undone).
	require.Eventually(t, func() bool {
		m, err := waveKube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mwc.Name, metav1.GetOptions{})
		require.NoError(t, err)
		before := *m.Webhooks[0].FailurePolicy
		fail := admissionregistrationv1.Fail
		m.Webhooks[0].FailurePolicy = &fail
		_, err = waveKube.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{})
		if err == nil {
			m, err = admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mwc.Name, metav1.GetOptions{})
			require.NoError(t, err)
			m.Webhooks[0].FailurePolicy = &before
			_, err = admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{})
			require.NoError(t, err)
			return false
		}
		return strings.Contains(err.Error(), "wave may change only the caBundle of its webhook's registration")
	}, time.Minute, 200*time.Millisecond, "the policy never refused wave a change of its registration's failure policy")
	// Nor its owner references (one to an object that is not there has the garbage collector
	// delete the registration) or finalizers.
	for what, change := range map[string]func(*admissionregistrationv1.MutatingWebhookConfiguration){
		"an owner reference": func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
			m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "gone", UID: "0f6a3c52-0000-4000-8000-000000000000"})
		},
		"a finalizer": func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
			m.Finalizers = append(m.Finalizers, "example.com/hold")
		},
	} {
		m, err := waveKube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mwc.Name, metav1.GetOptions{})
		require.NoError(t, err)
		change(m)
		_, err = waveKube.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{})
		require.Error(t, err, "wave adding %s to its registration", what)
		assert.Contains(t, err.Error(), "wave may change only the caBundle of its webhook's registration", what)
	}
	m, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mwc.Name, metav1.GetOptions{})
	require.NoError(t, err)
	m.Webhooks[0].ClientConfig.CABundle = nil
	_, err = admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, keeper.Sync(ctx), "the caBundle put back, as wave, through the policy")
	m, err = admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mwc.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, secret.Data[webhookcert.CACertKey], m.Webhooks[0].ClientConfig.CABundle)
	assert.Equal(t, admissionregistrationv1.Ignore, *m.Webhooks[0].FailurePolicy)

	renewAt := time.Now().Add(webhookcert.ServingValidity - 10*24*time.Hour)
	keeper.Now = func() time.Time { return renewAt }
	require.NoError(t, keeper.Sync(ctx), "renewal, as wave")
	renewed, err := admin.CoreV1().Secrets(ns).Get(ctx, secret.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, secret.Data["tls.crt"], renewed.Data["tls.crt"])

	other := &webhookcert.Keeper{Client: wave, Namespace: ns, Name: "another-secret", DNSNames: dns}
	assert.ErrorContains(t, other.Sync(ctx), "wave may create only immutable snapshots", "the policy lets only the certificate's Secret through")
	elsewhere := &webhookcert.Keeper{Client: wave, Namespace: ns, Name: release + "-wave-webhook-cert", Configuration: "someone-elses-webhook", DNSNames: dns}
	err = elsewhere.Sync(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "forbidden", "RBAC lets wave write its own configuration's caBundle only")
}

// The registration docs/revisions.md gives for installs without the chart is the chart's own:
// the same rules, selectors, conditions and failure policy.
func TestDocsRegisterTheWebhookAsTheChartDoes(t *testing.T) {
	md, err := os.ReadFile(filepath.Join(root, "docs", "revisions.md"))
	require.NoError(t, err)
	var block string
	for _, part := range strings.Split(string(md), "```yaml\n")[1:] {
		if body, _, _ := strings.Cut(part, "```"); strings.Contains(body, "kind: MutatingWebhookConfiguration") {
			block = body
		}
	}
	require.NotEmpty(t, block, "docs/revisions.md has the registration")
	var fromDocs *unstructured.Unstructured
	for _, o := range decode(t, []byte(block)) {
		fromDocs = o
	}
	var fromChart *unstructured.Unstructured
	for _, o := range decode(t, helmTemplate(t, "revisions.enabled=true", "revisions.webhook.certSecret=configwave-wave-webhook",
		"revisions.webhook.annotations.cert-manager\\.io/inject-ca-from=configwave-system/configwave-wave-webhook")) {
		if o.GetKind() == "MutatingWebhookConfiguration" {
			fromChart = o
		}
	}
	require.NotNil(t, fromChart)
	docsHooks, _, _ := unstructured.NestedSlice(fromDocs.Object, "webhooks")
	chartHooks, _, _ := unstructured.NestedSlice(fromChart.Object, "webhooks")
	assert.Equal(t, chartHooks, docsHooks)
	assert.Equal(t, fromChart.GetAnnotations(), fromDocs.GetAnnotations())
}
