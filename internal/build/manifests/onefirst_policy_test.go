package manifests_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/configwave/configwave/internal/reloader/coreclient"
	"github.com/configwave/configwave/internal/reloader/onefirst"
	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// config/reloader-rbac-one-first's policy, applied for real: the sidecars' own writes (a claim,
// a renewal, a promotion, a place in the batch, a rejection from it, a claim given back) go
// through, each as the pod its token names; another pod of the same ServiceAccount cannot
// write a claim or a place that is not its own, a token bound to no pod writes nothing, and no
// reloader token writes another Lease of the namespace (wave's leader Lease among them),
// although the Role grants update on every Lease.
func TestOneFirstPolicyLetsAPodWriteOnlyItsOwnTurn(t *testing.T) {
	testcluster.Need(t, cluster)
	admin, err := kubernetes.NewForConfig(cluster.Config())
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cluster.Config())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, o := range decode(t, kustomize(t, "config/reloader-rbac-one-first")) {
		gvr := map[string]string{"ValidatingAdmissionPolicy": "validatingadmissionpolicies", "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}[o.GetKind()]
		if gvr == "" {
			continue // the namespaced RBAC, made below in the test's namespace
		}
		ri := dyn.Resource(o.GroupVersionKind().GroupVersion().WithResource(gvr))
		_, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "configwave-manifest-test", Force: true})
		require.NoError(t, err, "%s %s", o.GetKind(), o.GetName())
		t.Cleanup(func() { _ = ri.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{}) })
	}
	ns := testcluster.Namespace(t, admin)
	_, err = admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "configwave-reloader"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	readYAML(t, "config/reloader-rbac-one-first/role.yaml", &role)
	readYAML(t, "config/reloader-rbac-one-first/rolebinding.yaml", &binding)
	_, err = admin.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &binding, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "configwave-wave"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("wave-0")}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// A sidecar of pod `pod` (its token names it), or of no pod (""), writing the record.
	lease := onefirst.LeaseName("Deployment", "web", []string{"configmap " + ns + "/app"})
	store := func(pod string, expiry time.Duration) *onefirst.LeaseStore {
		cfg := rest.CopyConfig(cluster.Config())
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":configwave-reloader",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
		if pod != "" {
			cfg.Impersonate.Extra = map[string][]string{"authentication.kubernetes.io/pod-name": {pod}}
		}
		client, err := coreclient.New(cfg)
		require.NoError(t, err)
		return &onefirst.LeaseStore{Client: client, Namespace: ns, Name: lease, Expiry: expiry}
	}
	// b runs with a longer --rollout-soak (a rollout of the Deployment that changed it): its
	// writes keep the claim's duration, and pass.
	a, b, c, nobody := store("web-a", 30*time.Second), store("web-b", 90*time.Second), store("web-c", 30*time.Second), store("", 30*time.Second)
	now := time.Now().UTC().Truncate(time.Millisecond)
	put := func(s *onefirst.LeaseStore, r onefirst.Record) error {
		_, version, err := a.Get(ctx)
		require.NoError(t, err)
		return s.Put(ctx, r, version)
	}
	const refusedBy = "ValidatingAdmissionPolicy 'configwave-reloader-one-first'"

	// The policy reaches admission a moment after it is created: until a token bound to no pod
	// is refused a claim (a claim let through before is taken back).
	claim := onefirst.Record{Content: "c1", State: onefirst.Soaking, First: "web-a", Since: now, Renewed: now, Good: "c0", Duration: 30 * time.Second}
	var last error
	defer func() {
		var se *apierrors.StatusError
		if errors.As(last, &se) {
			t.Logf("the last write of a token bound to no pod: %+v", se.ErrStatus)
		}
	}()
	require.Eventually(t, func() bool {
		err := put(nobody, claim)
		last = err
		if err == nil {
			require.NoError(t, admin.CoordinationV1().Leases(ns).Delete(ctx, lease, metav1.DeleteOptions{}))
		}
		return err != nil && strings.Contains(err.Error(), refusedBy)
	}, time.Minute, 200*time.Millisecond, "the policy never refused a token bound to no pod")
	t.Logf("refused: %v", last)

	require.NoError(t, put(a, claim), "a claims c1 for itself")
	renewed := claim
	renewed.Renewed = now.Add(10 * time.Second)
	require.NoError(t, put(a, renewed), "and renews it")

	for _, tc := range []struct {
		name string
		as   *onefirst.LeaseStore
		r    onefirst.Record
		says string
	}{
		{"b rejects a's content", b, onefirst.Record{Content: "c1", State: onefirst.Rejected, First: "web-a", Since: now, Renewed: renewed.Renewed, Reason: "x", Good: "c0"},
			"may change only its own place in the batch"},
		{"b promotes a's content, skipping its soak", b, onefirst.Record{Content: "c1", State: onefirst.Promoted, First: "web-a", Since: now, Renewed: renewed.Renewed, Good: "c1"},
			"may change only its own place in the batch"},
		{"b claims for another pod ($POD_NAME is what a sidecar says, not who it is)", b, onefirst.Record{Content: "c2", State: onefirst.Soaking, First: "web-c", Since: now, Renewed: now},
			"only for its own pod"},
		{"b claims a content already promoted, skipping the soak", b, onefirst.Record{Content: "c2", State: onefirst.Promoted, First: "web-b", Since: now, Renewed: now, Good: "c2"},
			"only as Soaking"},
		{"b gives back a's claim", b, onefirst.Record{Content: "c1", State: onefirst.Soaking, Since: now, Renewed: renewed.Renewed, Good: "c0"},
			"give back only its own claim"},
		{"a token bound to no pod renews", nobody, renewed, "bound to its pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := put(tc.as, tc.r)
			require.Error(t, err, "refused")
			assert.Contains(t, err.Error(), tc.says)
		})
	}

	promoted := renewed
	promoted.State, promoted.Good, promoted.Before = onefirst.Promoted, "c1", "c0"
	require.NoError(t, put(a, promoted), "a promotes its content, keeping the one before")
	joined := promoted
	joined.Batch = map[string]time.Time{"web-b": now.Add(20 * time.Second)}
	require.NoError(t, put(b, joined), "b takes a place in the batch")
	both := joined
	both.Batch = map[string]time.Time{"web-b": now.Add(20 * time.Second), "web-c": now.Add(21 * time.Second)}
	require.NoError(t, put(c, both), "and c")
	for _, tc := range []struct {
		name  string
		as    *onefirst.LeaseStore
		batch map[string]time.Time
	}{
		{"c takes b's place away", c, map[string]time.Time{"web-c": now.Add(21 * time.Second)}},
		{"c moves b's place far into the future", c, map[string]time.Time{"web-b": now.Add(time.Hour), "web-c": now.Add(21 * time.Second)}},
		{"c adds a place for another pod", c, map[string]time.Time{"web-b": now.Add(20 * time.Second), "web-c": now.Add(21 * time.Second), "web-d": now}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := both
			r.Batch = tc.batch
			err := put(tc.as, r)
			require.Error(t, err, "refused")
			assert.Contains(t, err.Error(), "may change only its own place in the batch")
		})
	}
	// The pod that promoted the content holds the Lease, but not the others' places.
	taken := both
	taken.Batch = map[string]time.Time{"web-c": now.Add(21 * time.Second)}
	err = put(a, taken)
	require.Error(t, err, "the promoter takes b's place away")
	assert.Contains(t, err.Error(), "may not change the other pods' places in its batch")
	left := both
	left.Batch = map[string]time.Time{"web-c": now.Add(21 * time.Second)}
	require.NoError(t, put(b, left), "b leaves the batch")
	// A reason is shown in Events on every pod: a sentence, not a page (the sidecar cuts its
	// own; a write of another process holding the token is refused).
	asC := rest.CopyConfig(cluster.Config())
	asC.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":configwave-reloader",
		Groups: []string{"system:serviceaccounts", "system:authenticated"}, Extra: map[string][]string{"authentication.kubernetes.io/pod-name": {"web-c"}}}
	typedC, err := kubernetes.NewForConfig(asC)
	require.NoError(t, err)
	l, err := admin.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
	require.NoError(t, err)
	l.Annotations[onefirst.StateAnnotation], l.Annotations[onefirst.ReasonAnnotation] = string(onefirst.Rejected), strings.Repeat("x", 257)
	_, err = typedC.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
	require.Error(t, err, "a reason longer than a sentence")
	assert.Contains(t, err.Error(), "at most 256 characters")
	rejected := left
	rejected.State, rejected.Renewed = onefirst.Rejected, now.Add(30*time.Second)
	rejected.Reason = "the pod became not Ready after the config was laid out"
	for what, r := range map[string]onefirst.Record{
		"c rejects it and names a good content of its own":  func() onefirst.Record { r := rejected; r.Good = "c9"; return r }(),
		"c rejects it and changes the content before":       func() onefirst.Record { r := rejected; r.Good, r.Before = "c9", "c9"; return r }(),
		"c rejects it and names another content taken back": func() onefirst.Record { r := rejected; r.Good, r.TakenBack = "c0", "c9"; return r }(),
	} {
		err := put(c, r)
		require.Error(t, err, what)
		assert.Contains(t, err.Error(), "may change only its own place in the batch", what)
	}
	rejected.Good, rejected.TakenBack = "c0", "c1" // every pod that runs c1 goes back to c0
	require.NoError(t, put(c, rejected), "c rejects the promoted content from its place in the batch, and the good one is the one before")

	// Other Leases are not the reloader's, whatever the Role grants.
	wave := &onefirst.LeaseStore{Client: b.Client, Namespace: ns, Name: "configwave-wave"}
	_, version, err := wave.Get(ctx)
	require.NoError(t, err)
	err = wave.Put(ctx, onefirst.Record{Content: "x", State: onefirst.Soaking, First: "web-b", Since: now, Renewed: now}, version)
	require.Error(t, err, "wave's leader Lease")
	assert.Contains(t, err.Error(), "writes only the rollout Leases")
	other := &onefirst.LeaseStore{Client: b.Client, Namespace: ns, Name: "other"}
	err = other.Put(ctx, onefirst.Record{Content: "x", State: onefirst.Soaking, First: "web-b", Since: now, Renewed: now}, "")
	require.Error(t, err, "a Lease of another name")
	assert.Contains(t, err.Error(), "writes only the rollout Leases")
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, into))
}

func ptr[T any](v T) *T { return &v }

// networkPolicy.webhookFrom narrows the revisions webhook's port to the peers it names; without
// it the port stays open to every source, as the metrics port without metricsFrom.
func TestChartWebhookFromNarrowsTheWebhookPort(t *testing.T) {
	ingressOf := func(set ...string) []any {
		for _, o := range decode(t, helmTemplate(t, append([]string{"revisions.enabled=true", "revisions.webhook.makeCertificate=true"}, set...)...)) {
			if o.GetKind() == "NetworkPolicy" {
				ingress, _, err := unstructured.NestedSlice(o.Object, "spec", "ingress")
				require.NoError(t, err)
				return ingress
			}
		}
		t.Fatal("no NetworkPolicy rendered")
		return nil
	}
	webhookRule := func(ingress []any) map[string]any {
		for _, r := range ingress {
			rule := r.(map[string]any)
			ports, _ := rule["ports"].([]any)
			if len(ports) == 1 && ports[0].(map[string]any)["port"] == "webhook" {
				return rule
			}
		}
		t.Fatal("no rule for the webhook port")
		return nil
	}
	assert.NotContains(t, webhookRule(ingressOf()), "from", "open to every source by default")
	narrowed := webhookRule(ingressOf("networkPolicy.webhookFrom[0].ipBlock.cidr=10.0.0.10/32"))
	assert.Equal(t, []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.10/32"}}}, narrowed["from"])
}
