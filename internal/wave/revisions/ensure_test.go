package revisions

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/confighash"
)

// memAPI is the API server as Ensure sees it: objects by kind and name, and the error the
// next create of a kind gets.
type memAPI struct {
	objs      map[configref.Ref]metav1.Object
	createErr map[configref.Kind]error
	creates   int
}

func (m *memAPI) Get(_ context.Context, ref configref.Ref) (metav1.Object, error) {
	if o, ok := m.objs[ref]; ok {
		return o, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: ref.Kind.Resource()}, ref.Name)
}

func (m *memAPI) Create(_ context.Context, kind configref.Kind, obj metav1.Object) (metav1.Object, error) {
	if err := m.createErr[kind]; err != nil {
		return nil, err
	}
	ref := configref.Ref{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if _, ok := m.objs[ref]; ok {
		return nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: kind.Resource()}, obj.GetName())
	}
	m.objs[ref] = obj
	m.creates++
	return obj, nil
}

func shop() *memAPI {
	return &memAPI{objs: map[configref.Ref]metav1.Object{
		cmApp: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "shop", ResourceVersion: "10"}, Data: map[string]string{"app.conf": "v1"}},
		secDB: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop", UID: "u", ResourceVersion: "11"}, Data: map[string][]byte{"password": []byte("hunter2")}},
	}}
}

var atDecision = []Source{{cmApp, "10"}, {secDB, "11"}}

func TestEnsureMakesEachSnapshotAndTheIndexOnce(t *testing.T) {
	api := shop()
	dg := confighash.Digester{Key: []byte("0123456789abcdef0123456789abcdef")}
	snaps, err := Ensure(context.Background(), api, dg, "shop", h1, atDecision)
	require.NoError(t, err)
	require.Len(t, snaps, 2)
	assert.Equal(t, 3, api.creates, "two snapshots and the index")

	d, _ := dg.Transform(api.objs[secDB])
	assert.Equal(t, SnapshotName("db", ContentID(confighash.KeyDigests(d), "")), snaps[secDB], "named from the keyed digests wave keeps")
	snap := api.objs[configref.Ref{Kind: configref.Secret, Namespace: "shop", Name: snaps[secDB]}].(*corev1.Secret)
	assert.Equal(t, []byte("hunter2"), snap.Data["password"])
	index := api.objs[configref.Ref{Kind: configref.ConfigMap, Namespace: "shop", Name: IndexName(h1)}].(*corev1.ConfigMap)
	back, err := ParseIndex("shop", index.Data)
	require.NoError(t, err)
	assert.Equal(t, snaps, back)
	assert.True(t, *index.Immutable)

	again, err := Ensure(context.Background(), api, dg, "shop", h1, atDecision)
	require.NoError(t, err, "a second look finds everything made")
	assert.Equal(t, snaps, again)
	assert.Equal(t, 3, api.creates)

	other, err := Ensure(context.Background(), api, dg, "shop", h2, atDecision[:1])
	require.NoError(t, err, "another revision with the same content of a source shares its snapshot")
	assert.Equal(t, snaps[cmApp], other[cmApp])
	assert.Equal(t, 4, api.creates, "only the other revision's index is new")
}

func TestEnsureRefuses(t *testing.T) {
	quota := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "db-x", errors.New(`exceeded quota: objects, requested: count/secrets=1, used: count/secrets=5, limited: count/secrets=5`))
	rbac := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "app-x", errors.New(`User "system:serviceaccount:configwave:wave" cannot create resource "configmaps"`))
	webhook := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "db-x", errors.New(`admission webhook "policy.example.com" denied the request: password hunter2 is weak`))
	for _, tc := range []struct {
		name     string
		change   func(*memAPI)
		sources  []Source
		want     string
		is       error
		withheld string
	}{
		{"a source written since the decision", nil, []Source{{cmApp, "9"}},
			"configmap shop/app: changed since the decision to roll (resourceVersion 10, decided on 9)", ErrSourceChanged, ""},
		{"a source gone", func(m *memAPI) { delete(m.objs, cmApp) }, atDecision[:1], "read configmap shop/app to snapshot it", nil, ""},
		{"an object of another's under a snapshot's name", func(m *memAPI) {
			api := shop()
			snaps, err := Ensure(context.Background(), api, confighash.Digester{}, "shop", h1, atDecision[:1])
			require.NoError(t, err)
			m.objs[configref.Ref{Kind: configref.ConfigMap, Namespace: "shop", Name: snaps[cmApp]}] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: snaps[cmApp], Namespace: "shop"}}
		}, atDecision[:1], "is not configwave's snapshot of this content: delete it (kubectl -n shop delete configmap app-", nil, ""},
		{"one made to look like wave's, with other data (whoever may create ConfigMaps there)", func(m *memAPI) {
			api := shop()
			snaps, err := Ensure(context.Background(), api, confighash.Digester{}, "shop", h1, atDecision[:1])
			require.NoError(t, err)
			ref := configref.Ref{Kind: configref.ConfigMap, Namespace: "shop", Name: snaps[cmApp]}
			forged := api.objs[ref].(*corev1.ConfigMap).DeepCopy()
			forged.Data = map[string]string{"k": "theirs"}
			m.objs[ref] = forged
		}, atDecision[:1], "is not configwave's snapshot of this content", nil, ""},
		{"RBAC without create", func(m *memAPI) { m.createErr = map[configref.Kind]error{configref.ConfigMap: rbac} }, atDecision,
			`give wave's ServiceAccount create on configmaps in shop (a Role rule: apiGroups [""], resources [configmaps], verbs [create])`, nil, ""},
		{"a quota", func(m *memAPI) { m.createErr = map[configref.Kind]error{configref.Secret: quota} }, atDecision,
			"refused by ResourceQuota objects (exceeded quota): Forbidden (HTTP 403; the API server's message is not repeated for a Secret): raise the quota's count/secrets", nil, ""},
		{"a webhook refuses it: named, not taken for RBAC", func(m *memAPI) {
			m.createErr = map[configref.Kind]error{configref.ConfigMap: apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "app-x", errors.New(`admission webhook "policy.example.com" denied the request: no`))}
		}, atDecision, "refused by admission webhook policy.example.com", nil, ""},
		{"a webhook's text about a Secret is never repeated", func(m *memAPI) { m.createErr = map[configref.Kind]error{configref.Secret: webhook} }, atDecision,
			"create secret shop/db-", nil, "hunter2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := shop()
			if tc.change != nil {
				tc.change(api)
			}
			_, err := Ensure(context.Background(), api, confighash.Digester{SecretsByMetadata: true}, "shop", h1, tc.sources)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			if tc.withheld != "" {
				assert.NotContains(t, err.Error(), tc.withheld)
				assert.True(t, apierrors.IsForbidden(err), "still an API error to whoever asks")
			}
		})
	}
	_, err := Ensure(context.Background(), shop(), confighash.Digester{}, "shop", "bad/hash", atDecision)
	assert.ErrorContains(t, err, `revision "bad/hash": the inputs hash cannot name an index`)
	_, err = Ensure(context.Background(), shop(), confighash.Digester{}, "web", h1, atDecision)
	assert.ErrorContains(t, err, "configmap shop/app: a pod in web cannot read it, so it has no snapshot")
}

func TestEnsureOfNoSourceMakesNothing(t *testing.T) {
	api := shop()
	snaps, err := Ensure(context.Background(), api, confighash.Digester{}, "shop", h1, nil)
	require.NoError(t, err)
	assert.Empty(t, snaps)
	assert.Zero(t, api.creates)
}

// Two revisions' inputs hashes, as wave writes them.
var h1, h2 = InputsHash("configmap.app=1"), InputsHash("configmap.app=2")

// A ServiceAccount's token Secret cannot be copied (the API server makes those itself): it is
// read live, and the rest of the revision keeps its snapshots.
func TestEnsureLeavesATokenSecretLive(t *testing.T) {
	api := shop()
	api.objs[secDB].(*corev1.Secret).Type = corev1.SecretTypeServiceAccountToken
	snaps, err := Ensure(context.Background(), api, confighash.Digester{SecretsByMetadata: true}, "shop", h1, atDecision)
	require.NoError(t, err)
	assert.Contains(t, snaps, cmApp)
	assert.NotContains(t, snaps, secDB)
}
