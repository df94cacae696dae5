package rollout

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/workload"

	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

// The rule in the README, branch by branch, in the manner of sample-controller's controller
// test: the caches are filled by hand, sync runs once, and the test checks the result and the
// exact writes sent to a fake API server. The end-to-end tests prove the same against a real
// control plane; this pins every branch in milliseconds.
func TestSyncDecisionTable(t *testing.T) {
	const ns = "ns"
	cm := func(v string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm", ResourceVersion: "7"}, Data: map[string]string{"k": v}}
	}
	deploy := func(optional bool, annotations, template map[string]string) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", ResourceVersion: "3",
			Annotations: map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}}}
		for k, v := range annotations {
			d.Annotations[k] = v
		}
		d.Spec.Template.Annotations = template
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Optional: &optional}}}}}
		return d
	}
	waveHash := func(key []byte, c *corev1.ConfigMap) string {
		used := podrefs.Extract(ns, nil, &deploy(false, nil, nil).Spec.Template.Spec)
		h, err := confighash.KeyedWaveHash(confighash.HashWave, key, used.Wave, func(configref.Ref) (any, error) { return c, nil })
		require.NoError(t, err)
		return h
	}
	bareInputsOf := func(key []byte, c *corev1.ConfigMap) string {
		used := podrefs.Extract(ns, nil, &deploy(false, nil, nil).Spec.Template.Spec)
		return confighash.InputsOf(ns, used.Visible, func(configref.Ref) (map[string]string, bool) {
			if c == nil {
				return nil, false
			}
			d, _ := confighash.Digester{Key: key}.Transform(c)
			return confighash.KeyDigests(d), true
		}).Value
	}
	inputsOf := func(key []byte, c *corev1.ConfigMap) string { // as wave writes it: naming its key
		return confighash.WithKeyID(confighash.KeyID(key), bareInputsOf(key, c))
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	// A workload written for Stakater Reloader: its annotations, not Wave's.
	stakaterDeploy := func(annotations map[string]string, env ...corev1.EnvVar) *appsv1.Deployment {
		d := deploy(false, annotations, nil)
		delete(d.Annotations, podrefs.UpdateOnConfigChangeAnnotation)
		d.Spec.Template.Spec.Containers[0].Env = env
		return d
	}
	auto := map[string]string{podrefs.StakaterAuto: "true"}
	tests := []struct {
		name       string
		workload   *appsv1.Deployment
		config     *corev1.ConfigMap // nil: it does not exist
		hashKey    []byte
		digestKey  []byte // the install key
		reloader   StakaterOptions
		dryRun     bool
		want       string
		wantPatch  bool   // one PATCH sent
		wantRoll   bool   // the PATCH writes the template
		wantHash   string // the template's Wave hash in the PATCH
		wantInputs string
		wantRecord func(t *testing.T, r rolloutrecord.Record) // the rollout record the PATCH writes
		wantEmpty  bool                                       // the PATCH writes an empty inputs record
	}{
		{name: "uses no config: an empty record, so that the next look finds it", workload: func() *appsv1.Deployment {
			d := deploy(false, nil, nil)
			d.Spec.Template.Spec.Containers[0].EnvFrom = nil
			return d
		}(), want: ResultBaseline, wantPatch: true, wantEmpty: true},
		{name: "no record, no hash: record only, nothing rolls", workload: deploy(false, nil, nil), config: cm("1"),
			want: ResultBaseline, wantPatch: true, wantInputs: inputsOf(nil, cm("1"))},
		{name: "no record, Wave's hash of the current data (adopted from Wave): record only", workload: deploy(false, nil, map[string]string{podrefs.ConfigHashAnnotation: waveHash(nil, cm("1"))}),
			config: cm("1"), want: ResultBaseline, wantPatch: true, wantInputs: inputsOf(nil, cm("1"))},
		{name: "no record, a stale hash (Wave was behind): roll once", workload: deploy(false, nil, map[string]string{podrefs.ConfigHashAnnotation: waveHash(nil, cm("0"))}),
			config: cm("1"), want: ResultRolled, wantPatch: true, wantRoll: true, wantHash: waveHash(nil, cm("1")), wantInputs: inputsOf(nil, cm("1"))},
		{name: "record equal to the inputs: nothing at all", workload: deploy(false, map[string]string{InputsAnnotation: inputsOf(nil, cm("1"))}, nil),
			config: cm("1"), want: ResultUnchanged},
		{name: "record differs: roll", workload: deploy(false, map[string]string{InputsAnnotation: inputsOf(nil, cm("0"))}, nil),
			config: cm("1"), want: ResultRolled, wantPatch: true, wantRoll: true, wantHash: waveHash(nil, cm("1")), wantInputs: inputsOf(nil, cm("1")),
			wantRecord: func(t *testing.T, r rolloutrecord.Record) {
				assert.Equal(t, "configmap/cm", r.Change, "the rollout record names the change")
				assert.WithinDuration(t, time.Now(), r.Started, 5*time.Second)
			}},
		{name: "required object missing, no record: record it as missing, roll nothing", workload: deploy(false, nil, nil),
			want: ResultMissing, wantPatch: true, wantInputs: inputsOf(nil, nil)},
		{name: "required object missing, with a record: the rollout record says what is missing, nothing rolls", workload: deploy(false, map[string]string{InputsAnnotation: inputsOf(nil, cm("1"))}, nil),
			want: ResultMissing, wantPatch: true, wantRecord: func(t *testing.T, r rolloutrecord.Record) {
				assert.Equal(t, "configmap/cm", r.Missing)
				assert.WithinDuration(t, time.Now(), r.MissingSince, 5*time.Second)
			}},
		{name: "required object missing, already recorded so: nothing", workload: deploy(false, map[string]string{InputsAnnotation: inputsOf(nil, cm("1")),
			rolloutrecord.Annotation: rolloutrecord.Record{Missing: "configmap/cm", MissingSince: time.Now()}.String()}, nil),
			want: ResultMissing},
		{name: "back as it was: the missing note goes, nothing rolls", workload: deploy(false, map[string]string{InputsAnnotation: inputsOf(nil, cm("1")),
			rolloutrecord.Annotation: rolloutrecord.Record{Change: "configmap/cm", Started: time.Now(), Missing: "configmap/cm", MissingSince: time.Now()}.String()}, nil),
			config: cm("1"), want: ResultUnchanged, wantPatch: true, wantRecord: func(t *testing.T, r rolloutrecord.Record) {
				assert.Empty(t, r.Missing)
				assert.Equal(t, "configmap/cm", r.Change, "the last rollout stays on record")
			}},
		{name: "optional object absent: recorded as absent", workload: deploy(true, nil, nil),
			want: ResultBaseline, wantPatch: true, wantInputs: "configmap/cm=absent"},
		{name: "keyed (--hash-key-file): the hash and the digests are HMACs", workload: deploy(false, map[string]string{InputsAnnotation: "configmap/cm=0000000000000000"}, nil),
			config: cm("1"), hashKey: key, want: ResultRolled, wantPatch: true, wantRoll: true, wantHash: waveHash(key, cm("1")), wantInputs: inputsOf(key, cm("1"))},
		{name: "install key, an unkeyed record of the current config (written before the key): keyed, nothing rolls",
			workload: deploy(false, map[string]string{InputsAnnotation: inputsOf(nil, cm("1"))}, nil), config: cm("1"), digestKey: key,
			want: ResultBaseline, wantPatch: true, wantInputs: inputsOf(key, cm("1"))},
		{name: "install key, an unkeyed record of older config: roll once; Wave's hash stays Wave's",
			workload: deploy(false, map[string]string{InputsAnnotation: inputsOf(nil, cm("0"))}, nil), config: cm("1"), digestKey: key,
			want: ResultRolled, wantPatch: true, wantRoll: true, wantHash: waveHash(nil, cm("1")), wantInputs: inputsOf(key, cm("1"))},
		{name: "install key, a record under a key wave no longer has, template at Wave's hash: keyed, nothing rolls",
			workload: deploy(false, map[string]string{InputsAnnotation: confighash.WithKeyID("deadbeef", "configmap/cm=0000000000000000")},
				map[string]string{podrefs.ConfigHashAnnotation: waveHash(nil, cm("1"))}), config: cm("1"), digestKey: key,
			want: ResultBaseline, wantPatch: true, wantInputs: inputsOf(key, cm("1"))},
		{name: "install key, a record under a key wave no longer has, template behind: roll once",
			workload: deploy(false, map[string]string{InputsAnnotation: confighash.WithKeyID("deadbeef", "configmap/cm=0000000000000000")},
				map[string]string{podrefs.ConfigHashAnnotation: waveHash(nil, cm("0"))}), config: cm("1"), digestKey: key,
			want: ResultRolled, wantPatch: true, wantRoll: true, wantHash: waveHash(nil, cm("1")), wantInputs: inputsOf(key, cm("1"))},
		{name: "--hash-key-file, a record written before records named their key: named, nothing rolls",
			workload: deploy(false, map[string]string{InputsAnnotation: bareInputsOf(key, cm("1"))}, nil), config: cm("1"), hashKey: key,
			want: ResultBaseline, wantPatch: true, wantInputs: inputsOf(key, cm("1"))},
		{name: "Reloader's auto: a change rolls, with our inputs hash and no Wave hash",
			workload: stakaterDeploy(map[string]string{podrefs.StakaterAuto: "true", InputsAnnotation: inputsOf(nil, cm("0"))}), config: cm("1"),
			want: ResultRolled, wantPatch: true, wantRoll: true, wantHash: "", wantInputs: inputsOf(nil, cm("1"))},
		{name: "Reloader's reload list names another ConfigMap: a change of this one is recorded, nothing rolls",
			workload: stakaterDeploy(map[string]string{podrefs.StakaterConfigMapReload: "other", InputsAnnotation: inputsOf(nil, cm("0"))}), config: cm("1"),
			want: ResultBaseline, wantPatch: true, wantInputs: inputsOf(nil, cm("1")) + ",configmap/other=absent"},
		{name: "Reloader's reload list: the named ConfigMap created later: recorded, nothing rolls (as Reloader without --reload-on-create)",
			workload: stakaterDeploy(map[string]string{podrefs.StakaterConfigMapReload: "cm", InputsAnnotation: "configmap/cm=absent"}, corev1.EnvVar{Name: "X", Value: "y"}), config: cm("1"),
			want: ResultBaseline, wantPatch: true, wantInputs: inputsOf(nil, cm("1"))},
		{name: "... and with --reload-on-create: rolls",
			workload: stakaterDeploy(map[string]string{podrefs.StakaterConfigMapReload: "cm", InputsAnnotation: "configmap/cm=absent"}, corev1.EnvVar{Name: "X", Value: "y"}), config: cm("1"),
			reloader: StakaterOptions{RollOnCreate: true}, want: ResultRolled, wantPatch: true, wantRoll: true, wantInputs: inputsOf(nil, cm("1"))},
		{name: "--resources-to-ignore=configmaps: a ConfigMap change is recorded, nothing rolls, whatever the dialect",
			workload: deploy(false, map[string]string{InputsAnnotation: inputsOf(nil, cm("0"))}, nil), config: cm("1"),
			reloader: StakaterOptions{ConfigMaps: true}, want: ResultBaseline, wantPatch: true, wantInputs: inputsOf(nil, cm("1"))},
		{name: "--namespaces-to-ignore: left alone",
			workload: deploy(false, map[string]string{InputsAnnotation: inputsOf(nil, cm("0"))}, nil), config: cm("1"),
			reloader: StakaterOptions{Namespaces: map[string]bool{"ns": true}}, want: ResultIgnored},
		{name: "Reloader's auto with the ConfigMap excluded: recorded, nothing rolls",
			workload: stakaterDeploy(map[string]string{podrefs.StakaterAuto: "true", podrefs.StakaterConfigMapsExclude: "cm", InputsAnnotation: inputsOf(nil, cm("0"))}), config: cm("1"),
			want: ResultBaseline, wantPatch: true, wantInputs: inputsOf(nil, cm("1"))},
		{name: "adopted from Reloader: its env var holds Reloader's hash of the current data: nothing rolls",
			workload: stakaterDeploy(auto, corev1.EnvVar{Name: "STAKATER_CM_CONFIGMAP", Value: confighash.StakaterHash(cm("1"))}), config: cm("1"),
			want: ResultBaseline, wantPatch: true, wantInputs: inputsOf(nil, cm("1"))},
		{name: "adopted from Reloader: its env var holds an older hash (Reloader was behind): roll once",
			workload: stakaterDeploy(auto, corev1.EnvVar{Name: "STAKATER_CM_CONFIGMAP", Value: confighash.StakaterHash(cm("0"))}), config: cm("1"),
			want: ResultRolled, wantPatch: true, wantRoll: true, wantInputs: inputsOf(nil, cm("1")),
			wantRecord: func(t *testing.T, r rolloutrecord.Record) {
				assert.Equal(t, "configmap/cm (Reloader's mark is older)", r.Change)
			}},
		{name: "adopted from Reloader's annotations strategy: last-reloaded-from of the current data: nothing rolls",
			workload: func() *appsv1.Deployment {
				d := stakaterDeploy(auto)
				d.Spec.Template.Annotations = map[string]string{podrefs.StakaterLastReloadedFrom: `{"type":"CONFIGMAP","name":"cm","namespace":"ns","hash":"` + confighash.StakaterHash(cm("1")) + `","containerRefs":["app"],"observedAt":1}`}
				return d
			}(), config: cm("1"), want: ResultBaseline, wantPatch: true, wantInputs: inputsOf(nil, cm("1"))},
		{name: "both dialects: one decision, one patch, Wave's hash written",
			workload: deploy(false, map[string]string{podrefs.StakaterAuto: "true", InputsAnnotation: inputsOf(nil, cm("0"))}, nil), config: cm("1"),
			want: ResultRolled, wantPatch: true, wantRoll: true, wantHash: waveHash(nil, cm("1")), wantInputs: inputsOf(nil, cm("1"))},
		{name: "dry run: decides, writes nothing", workload: deploy(false, map[string]string{InputsAnnotation: inputsOf(nil, cm("0"))}, nil),
			config: cm("1"), dryRun: true, want: ResultRolled},
		{name: "not opted in: ignored", workload: func() *appsv1.Deployment { d := deploy(false, nil, nil); d.Annotations = nil; return d }(),
			config: cm("1"), want: ResultIgnored},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []runtime.Object{tt.workload}
			if tt.config != nil {
				objs = append(objs, tt.config)
			}
			client := fake.NewSimpleClientset(objs...)
			digestKey := tt.digestKey
			if digestKey == nil {
				digestKey = tt.hashKey
			}
			inf := NewInformers(workload.Clients{Kube: waveclienttest.Wrap(client)}, workload.Builtin(), []string{ns}, labels.Everything(), time.Minute, confighash.Digester{Key: digestKey})
			c, err := NewController(Config{Client: waveclienttest.Wrap(client), Informers: inf, Recorder: record.NewFakeRecorder(10),
				Metrics: testMetrics(),
				HashKey: tt.hashKey, DigestKey: tt.digestKey, DryRun: tt.dryRun, Reloader: tt.reloader})
			require.NoError(t, err)
			require.NoError(t, inf.workloads["Deployment"][0].GetIndexer().Add(tt.workload))
			if tt.config != nil {
				digested, err := inf.digester.Transform(tt.config)
				require.NoError(t, err)
				require.NoError(t, inf.configs[configref.ConfigMap][0].GetIndexer().Add(digested))
			}
			client.ClearActions()

			got, err := c.sync(context.Background(), "Deployment/ns/app")
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			if tt.dryRun {
				assert.False(t, c.follow.IsOurs("Deployment/ns/app"), "a dry run writes nothing, so it follows nothing")
			}

			var patches []k8stesting.PatchAction
			for _, a := range client.Actions() {
				if p, ok := a.(k8stesting.PatchAction); ok {
					patches = append(patches, p)
				} else {
					assert.Equal(t, "get", a.GetVerb(), "only whole-object reads besides the patch: %v", a)
				}
			}
			if !tt.wantPatch {
				assert.Empty(t, patches)
				return
			}
			require.Len(t, patches, 1)
			var body struct {
				Metadata struct {
					Annotations     map[string]string `json:"annotations"`
					ResourceVersion string            `json:"resourceVersion"`
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
			assert.Equal(t, "3", body.Metadata.ResourceVersion, "the patch is conditional on the version decided on")
			if tt.wantEmpty {
				v, ok := body.Metadata.Annotations[InputsAnnotation]
				assert.True(t, ok)
				assert.Empty(t, v)
			}
			if tt.wantInputs != "" {
				assert.Equal(t, tt.wantInputs, body.Metadata.Annotations[InputsAnnotation])
			}
			if tt.wantRecord != nil {
				r, err := rolloutrecord.ParseRecord(body.Metadata.Annotations[rolloutrecord.Annotation])
				require.NoError(t, err)
				tt.wantRecord(t, r)
			}
			if !tt.wantRoll {
				assert.Nil(t, body.Spec, "a baseline writes metadata only, which rolls nothing")
				return
			}
			require.NotNil(t, body.Spec)
			hash, hasHash := body.Spec.Template.Metadata.Annotations[podrefs.ConfigHashAnnotation]
			assert.Equal(t, tt.wantHash, hash)
			assert.Equal(t, tt.wantHash != "", hasHash, "Wave's hash only on workloads that speak Wave")
			assert.NotEmpty(t, body.Spec.Template.Metadata.Annotations[InputsHashAnnotation])
		})
	}
}
