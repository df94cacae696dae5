package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/workload"

	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

// Without an install key (Secrets by metadata), a workload's record and template hash hold
// nothing of a Secret's value: a write of the Secret rolls, a value that changed without a
// write (impossible in the API: it proves the value never enters) does not; and once a key is
// there, a record made without one is adopted without a rollout when the pods run the current
// config. sync runs once on caches filled by hand; the test reads the PATCH sent.
func TestSyncSecretsByMetadata(t *testing.T) {
	const ns, value = "ns", "hunter2-bymeta"
	key := []byte("0123456789abcdef0123456789abcdef")
	secret := func(rv, v string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s", UID: "6f1d", ResourceVersion: rv},
			Data: map[string][]byte{"password": []byte(v)}}
	}
	deploy := func(annotations, template map[string]string) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", ResourceVersion: "3",
			Annotations: map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}}}
		for k, v := range annotations {
			d.Annotations[k] = v
		}
		d.Spec.Template.Annotations = template
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}}}
		return d
	}
	used := podrefs.Extract(ns, nil, &deploy(nil, nil).Spec.Template.Spec)
	inputsWith := func(dg confighash.Digester, s *corev1.Secret) string {
		return confighash.InputsOf(ns, used.Visible, func(configref.Ref) (map[string]string, bool) {
			d, err := dg.Transform(s)
			require.NoError(t, err)
			return confighash.KeyDigests(d), true
		}).Value
	}
	byMeta := confighash.Digester{SecretsByMetadata: true}
	metaRecord := func(own bool, s *corev1.Secret) string {
		return confighash.RecordValue(confighash.MetaID, own, inputsWith(byMeta, s))
	}
	wavesFormula := func(s *corev1.Secret) string {
		h, err := confighash.WaveHash(confighash.HashWave, used.Wave, func(configref.Ref) (any, error) { return s, nil })
		require.NoError(t, err)
		return h
	}
	keyed := confighash.Digester{Key: key}
	tests := []struct {
		name       string
		workload   *appsv1.Deployment
		cached     *corev1.Secret // what the informer saw
		api        *corev1.Secret // what the API serves; nil: as cached
		digester   confighash.Digester
		want       string
		wantRoll   bool
		wantInputs string
		wantHash   string
	}{
		{name: "no key, first sight: the record of the Secret's metadata, marked; nothing rolls",
			workload: deploy(nil, nil), cached: secret("5", value), digester: byMeta,
			want: ResultBaseline, wantInputs: metaRecord(true, secret("5", value))},
		{name: "no key, the record current: nothing at all",
			workload: deploy(map[string]string{InputsAnnotation: metaRecord(true, secret("5", value))}, nil), cached: secret("5", value), digester: byMeta,
			want: ResultUnchanged},
		{name: "no key, another value under the same uid and resourceVersion: nothing (the value never enters)",
			workload: deploy(map[string]string{InputsAnnotation: metaRecord(true, secret("5", value))}, nil), cached: secret("5", value+"-changed"), digester: byMeta,
			want: ResultUnchanged},
		{name: "no key, the Secret written (even its metadata alone): roll once, to the hash of the inputs",
			workload: deploy(map[string]string{InputsAnnotation: metaRecord(true, secret("5", value))}, nil), cached: secret("6", value), digester: byMeta,
			want: ResultRolled, wantRoll: true, wantInputs: metaRecord(true, secret("6", value)),
			wantHash: confighash.HashOfInputs(inputsWith(byMeta, secret("6", value)))},
		{name: "a key now (the Secret made later), a record made without one of the current version: keyed, nothing rolls",
			workload: deploy(map[string]string{InputsAnnotation: metaRecord(true, secret("5", value))},
				map[string]string{podrefs.ConfigHashAnnotation: confighash.HashOfInputs(inputsWith(byMeta, secret("5", value)))}), // from its last rollout
			cached: secret("5", value), digester: keyed,
			want: ResultBaseline, wantInputs: confighash.RecordValue(confighash.KeyID(key), true, inputsWith(keyed, secret("5", value)))},
		{name: "a key now, a record made without one of the cache's version, the API a version ahead with the same data: adopted as the cache decided, nothing rolls",
			workload: deploy(map[string]string{InputsAnnotation: metaRecord(true, secret("5", value))},
				map[string]string{podrefs.ConfigHashAnnotation: confighash.HashOfInputs(inputsWith(byMeta, secret("5", value)))}),
			cached: secret("5", value), api: secret("6", value), digester: keyed,
			want: ResultBaseline, wantInputs: confighash.RecordValue(confighash.KeyID(key), true, inputsWith(keyed, secret("5", value)))},
		{name: "a key now, a record made without one, the Secret written since: roll once",
			workload: deploy(map[string]string{InputsAnnotation: metaRecord(true, secret("5", value))}, nil), cached: secret("6", value+"-2"), digester: keyed,
			want: ResultRolled, wantRoll: true, wantInputs: confighash.RecordValue(confighash.KeyID(key), true, inputsWith(keyed, secret("6", value+"-2")))},
		{name: "no key, a record made under a key (the Secret deleted since): adopted by Wave's hash on the template, nothing rolls",
			workload: deploy(map[string]string{InputsAnnotation: confighash.WithKeyID(confighash.KeyID(key), inputsWith(keyed, secret("5", value)))},
				map[string]string{podrefs.ConfigHashAnnotation: wavesFormula(secret("5", value))}), cached: secret("5", value), digester: byMeta,
			want: ResultBaseline, wantInputs: metaRecord(false, secret("5", value))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := tt.api
			if api == nil {
				api = tt.cached
			}
			client := fake.NewSimpleClientset(tt.workload, api)
			inf := NewInformers(workload.Clients{Kube: waveclienttest.Wrap(client)}, workload.Builtin(), []string{ns}, labels.Everything(), time.Minute, tt.digester)
			c, err := NewController(Config{Client: waveclienttest.Wrap(client), Informers: inf, Recorder: record.NewFakeRecorder(10),
				Metrics: testMetrics(), DigestKey: tt.digester.Key})
			require.NoError(t, err)
			require.NoError(t, inf.workloads["Deployment"][0].GetIndexer().Add(tt.workload))
			digested, err := inf.digester.Transform(tt.cached)
			require.NoError(t, err)
			require.NoError(t, inf.configs[configref.Secret][0].GetIndexer().Add(digested))
			client.ClearActions()

			got, err := c.sync(context.Background(), "Deployment/ns/app")
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)

			var patches []k8stesting.PatchAction
			for _, a := range client.Actions() {
				if p, ok := a.(k8stesting.PatchAction); ok {
					patches = append(patches, p)
				}
			}
			if tt.wantInputs == "" {
				assert.Empty(t, patches)
				return
			}
			require.Len(t, patches, 1)
			var body struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
				Spec *struct {
					Template struct {
						Metadata struct {
							Annotations map[string]string `json:"annotations"`
						} `json:"metadata"`
					} `json:"template"`
				} `json:"spec"`
			}
			require.NoError(t, json.Unmarshal(patches[0].GetPatch(), &body))
			assert.Equal(t, tt.wantInputs, body.Metadata.Annotations[InputsAnnotation])
			assert.Equal(t, tt.wantRoll, body.Spec != nil, "the template written only by a rollout")
			// Nothing written tests a guess of the value: no digest of it, nor Wave's formula.
			sum := sha256.Sum256([]byte(tt.cached.Data["password"]))
			plain := inputsWith(confighash.Digester{}, tt.cached)
			for _, written := range []string{string(patches[0].GetPatch())} {
				assert.NotContains(t, written, hex.EncodeToString(sum[:8]))
				assert.NotContains(t, written, confighash.ParseInputs(plain)["secret/s"])
				if tt.digester.SecretsByMetadata {
					assert.NotContains(t, written, wavesFormula(tt.cached), "no Wave hash of the data on a workload that had none")
				}
			}
			if tt.wantHash != "" {
				require.NotNil(t, body.Spec)
				assert.Equal(t, tt.wantHash, body.Spec.Template.Metadata.Annotations[podrefs.ConfigHashAnnotation])
				assert.NotEqual(t, wavesFormula(tt.cached), tt.wantHash)
			}
		})
	}
}
