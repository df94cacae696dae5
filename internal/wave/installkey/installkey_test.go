package installkey

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/configwave/configwave/internal/wave/access"
	"github.com/configwave/configwave/internal/wave/access/accesstest"
	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

// The whole policy, branch by branch.
func TestDecide(t *testing.T) {
	tests := []struct {
		name string
		f    Facts
		want Action
	}{
		{"the Secret holds a key: use it", Facts{Secret: Found}, UseKey},
		{"... whatever else holds", Facts{Secret: Found, MayCreate: true, DryRun: true}, UseKey},
		{"too short to be a key: fail closed", Facts{Secret: TooShort, MayCreate: true}, FailClosed},
		{"unreadable (RBAC forbids get): fail closed, it may hold a key", Facts{Secret: Unreadable, MayCreate: true}, FailClosed},
		{"a transient error: look again", Facts{Secret: LookupFailed}, Retry},
		{"absent, RBAC allows create: make it", Facts{Secret: Absent, MayCreate: true}, CreateKey},
		{"absent, RBAC forbids create (a peer's chart): run without a key", Facts{Secret: Absent}, RunWithoutKey},
		{"absent, RBAC allows create and a quota refused it: wait, then try again", Facts{Secret: Absent, MayCreate: true, Refused: true}, Retry},
		{"absent, refused, and RBAC forbids create now: run without a key", Facts{Secret: Absent, Refused: true}, RunWithoutKey},
		{"dry run, absent, RBAC allows create: decide unkeyed, make nothing", Facts{Secret: Absent, MayCreate: true, DryRun: true}, DecideUnkeyed},
		{"dry run, absent, RBAC forbids create: as the real run would", Facts{Secret: Absent, DryRun: true}, RunWithoutKey},
		{"dry run, too short: still refused", Facts{Secret: TooShort, DryRun: true}, FailClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want.String(), Decide(tt.f).String())
		})
	}
}

// api is a fake API server whose RBAC allows what allow says, answering
// SelfSubjectAccessReviews and refusing what it forbids with 403, as the RBAC authorizer does.
func api(t *testing.T, allow func(access.Check) bool, objs ...runtime.Object) *fake.Clientset {
	t.Helper()
	client := fake.NewClientset(objs...)
	accesstest.Answer(client, allow)
	client.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetResource().Resource == "selfsubjectaccessreviews" {
			return false, nil, nil
		}
		c := access.Check{Verb: a.GetVerb(), Group: a.GetResource().Group, Resource: a.GetResource().Resource, Namespace: a.GetNamespace()}
		if g, ok := a.(k8stesting.GetAction); ok {
			c.Name = g.GetName()
		}
		if allow(c) {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), c.Name, fmt.Errorf("RBAC: %s", c))
	})
	return client
}

// waveRBAC: the Secret may be read, and Secrets created when mayCreate.
func waveRBAC(mayCreate bool) func(access.Check) bool {
	return func(c access.Check) bool {
		return c.Resource == "secrets" && (c.Verb == "get" || c.Verb == "create" && mayCreate)
	}
}

var fast = wait.Backoff{Duration: time.Millisecond, Factor: 2, Cap: 4 * time.Millisecond, Steps: 1 << 20}

func load(t *testing.T, client *fake.Clientset, dryRun bool) (Result, error) {
	t.Helper()
	return Load(context.Background(), waveclienttest.Wrap(client), Options{Namespace: "ops", Name: "k", DryRun: dryRun, Backoff: fast})
}

func TestLoadMakesTheKeyOnceAndKeepsIt(t *testing.T) {
	client := api(t, waveRBAC(true))
	res, err := load(t, client, false)
	require.NoError(t, err)
	assert.Equal(t, ModeKeyed, res.Mode)
	assert.Len(t, res.Key, Size)
	s, err := client.CoreV1().Secrets("ops").Get(context.Background(), "k", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, *s.Immutable)
	again, err := load(t, client, false)
	require.NoError(t, err)
	assert.Equal(t, res.Key, again.Key, "the next start reads the same key")
}

func TestLoadUsesTheKeyAnotherReplicaMadeFirst(t *testing.T) {
	theirs := []byte("0123456789abcdef0123456789abcdef")
	client := api(t, waveRBAC(true))
	client.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "k"}, Data: map[string][]byte{DataKey: theirs}}
		require.NoError(t, client.Tracker().Add(s))
		return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, "k")
	})
	res, err := load(t, client, false)
	require.NoError(t, err)
	assert.Equal(t, theirs, res.Key)
}

// A key someone planted where wave once kept it under a peer's RBAC, a ConfigMap or a Lease of
// the install key's name that anyone with create on those in wave's namespace could make, is
// never read: wave's key is a Secret's, its own or none. Before, it was read before anything
// was made, and used.
func TestLoadNeverReadsAPlantedKey(t *testing.T) {
	planted := []byte("chosen-by-someone-else-0123456789")
	plants := func() []runtime.Object {
		return []runtime.Object{
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "k"}, BinaryData: map[string][]byte{DataKey: planted}},
			&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "k",
				Annotations: map[string]string{"configwave.io/install-key": base64.StdEncoding.EncodeToString(planted)}}},
		}
	}
	every := func(c access.Check) bool { return true }
	tests := []struct {
		name  string
		allow func(access.Check) bool
		want  Mode
	}{
		{"wave may create Secrets: a new Secret's key", every, ModeKeyed},
		{"wave may create ConfigMaps and Leases, not Secrets (a peer's chart): no key", func(c access.Check) bool { return !(c.Resource == "secrets" && c.Verb == "create") }, ModeSecretsByMetadata},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := api(t, tt.allow, plants()...)
			res, err := load(t, client, false)
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Mode)
			assert.NotEqual(t, planted, res.Key)
			for _, a := range client.Actions() {
				assert.Contains(t, []string{"secrets", "selfsubjectaccessreviews"}, a.GetResource().Resource, "%s %s: nothing but the Secret is read or made", a.GetVerb(), a.GetResource().Resource)
			}
		})
	}
}

// A quota on Secrets answers 403 too, where RBAC allows the create: wave asks RBAC rather than
// reading the 403 as "forbidden", waits, says once a try which quota refused and what to do, and
// makes the key once there is room. Before, any 403 counted as RBAC's: wave gave up on the
// Secret.
func TestLoadWaitsOutAQuota(t *testing.T) {
	for _, tt := range []struct {
		name, message, want string
	}{
		{"exhausted", `secrets "k" is forbidden: exceeded quota: secrets-cap, requested: count/secrets=1, used: count/secrets=4, limited: count/secrets=4`, "ResourceQuota secrets-cap (exceeded quota)"},
		{"not yet computed in a new namespace", `secrets "k" is forbidden: status unknown for quota: fresh-quota, resource: count/secrets`, "ResourceQuota fresh-quota (status unknown for quota)"},
		{"an admission webhook", `admission webhook "deny.example.com" denied the request: no`, "admission webhook deny.example.com"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := api(t, waveRBAC(true))
			refusals := 0
			client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				if refusals++; refusals <= 2 {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "k", fmt.Errorf("%s", strings.TrimPrefix(tt.message, `secrets "k" is forbidden: `)))
				}
				return false, nil, nil // room again: the tracker makes it
			})
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			ctx := klog.NewContext(context.Background(), logger)
			res, err := Load(ctx, waveclienttest.Wrap(client), Options{Namespace: "ops", Name: "k", Backoff: fast})
			require.NoError(t, err)
			assert.Equal(t, ModeKeyed, res.Mode, "made once the quota let it")
			assert.Len(t, res.Key, Size)
			var lines []string
			for _, e := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
				lines = append(lines, e.Message+" "+fmt.Sprint(e.WithKVList...)+" "+fmt.Sprint(e.ParameterKVList...))
			}
			require.Len(t, lines, 2, "one line a refused try")
			for _, l := range lines {
				assert.Contains(t, l, tt.want)
				assert.Contains(t, l, "create the Secret yourself: kubectl -n ops create secret generic k --from-literal=key=")
				assert.NotContains(t, l, base64.StdEncoding.EncodeToString(res.Key))
			}
			if strings.Contains(tt.want, "ResourceQuota") {
				assert.Contains(t, lines[0], "raise the quota's count/secrets")
			}
		})
	}

	t.Run("refused until wave stops: the error names the quota", func(t *testing.T) {
		client := api(t, waveRBAC(true))
		client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "k", fmt.Errorf("exceeded quota: secrets-cap, requested: count/secrets=1"))
		})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := Load(ctx, waveclienttest.Wrap(client), Options{Namespace: "ops", Name: "k", Backoff: fast})
		require.ErrorIs(t, err, context.DeadlineExceeded, "it waited until the end, and did not exit on its own")
		assert.Contains(t, err.Error(), "install key ops/k: refused by ResourceQuota secrets-cap (exceeded quota)")
		assert.Contains(t, err.Error(), "kubectl -n ops create secret generic k")
	})
}

// Where RBAC forbids wave to create Secrets and none holds the key, wave runs without one:
// asked, never inferred from a 403, and nothing is created.
func TestLoadRunsWithoutAKeyWhereRBACForbids(t *testing.T) {
	client := api(t, waveRBAC(false))
	res, err := load(t, client, false)
	require.NoError(t, err)
	assert.Equal(t, ModeSecretsByMetadata, res.Mode)
	assert.Nil(t, res.Key)
	assert.Equal(t, "Secret ops/k is absent and wave may not create Secrets in ops", res.Why)
	for _, a := range actionsOn(client, "secrets") {
		assert.NotEqual(t, "create", a.GetVerb(), "no create tried")
	}

	t.Run("RBAC changed between the review and the create", func(t *testing.T) {
		allowed := true
		client := api(t, func(c access.Check) bool { return c.Verb == "get" || allowed })
		client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			allowed = false // the Role went away
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "k", fmt.Errorf("RBAC: no"))
		})
		res, err := load(t, client, false)
		require.NoError(t, err)
		assert.Equal(t, ModeSecretsByMetadata, res.Mode)
	})

	t.Run("a Secret made by hand later is used: the key, keyed", func(t *testing.T) {
		key := []byte("0123456789abcdef0123456789abcdef")
		client := api(t, waveRBAC(false), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "k"}, Data: map[string][]byte{DataKey: key}})
		res, err := load(t, client, false)
		require.NoError(t, err)
		assert.Equal(t, ModeKeyed, res.Mode)
		assert.Equal(t, key, res.Key)
	})
}

func TestLoadSaysWhatToDo(t *testing.T) {
	short := api(t, waveRBAC(true), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "k"}, Data: map[string][]byte{DataKey: []byte("SHORTSECRET")}})
	_, err := load(t, short, false)
	require.ErrorIs(t, err, ErrTooShort)
	assert.Contains(t, err.Error(), "install key ops/k")
	assert.Contains(t, err.Error(), "11 bytes")
	assert.NotContains(t, err.Error(), "SHORTSECRET", "never the key")

	unreadable := api(t, func(c access.Check) bool { return c.Verb == "create" })
	_, err = load(t, unreadable, false)
	require.ErrorIs(t, err, ErrUnreadable, "asked: RBAC forbids get")
	assert.Empty(t, actionsOn(unreadable, "secrets"), "not even tried")

	res, err := load(t, api(t, waveRBAC(true)), true)
	require.NoError(t, err, "a dry run makes nothing")
	assert.Equal(t, ModeUnkeyed, res.Mode)
	assert.Contains(t, res.Why, "dry run")

	flaky := api(t, waveRBAC(true))
	flaky.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is down")
	})
	_, err = load(t, flaky, false)
	require.Error(t, err, "a lasting transient error ends the wait, to say so")
	assert.Contains(t, err.Error(), "install key ops/k: read it: etcd is down")
}

func actionsOn(client *fake.Clientset, resource string) []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range client.Actions() {
		if a.GetResource().Resource == resource {
			out = append(out, a)
		}
	}
	return out
}
