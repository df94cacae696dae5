package confighash

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/podrefs"
)

func objects(objs ...any) GetFunc {
	byRef := map[configref.Ref]any{}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.ConfigMap:
			byRef[configref.Ref{Kind: configref.ConfigMap, Namespace: o.Namespace, Name: o.Name}] = o
		case *corev1.Secret:
			byRef[configref.Ref{Kind: configref.Secret, Namespace: o.Namespace, Name: o.Name}] = o
		}
	}
	return func(r configref.Ref) (any, error) { return byRef[r], nil }
}

func cmObj(name string, data map[string]string, binary map[string][]byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: data, BinaryData: binary}
}

func secretObj(name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: data}
}

func all(kind configref.Kind, name string, required bool) podrefs.Uses {
	return podrefs.Uses{configref.Ref{Kind: kind, Namespace: "ns", Name: name}: {AllKeys: true, Required: required}}
}

func merge(us ...podrefs.Uses) podrefs.Uses {
	out := podrefs.Uses{}
	for _, u := range us {
		for k, v := range u {
			out[k] = v
		}
	}
	return out
}

// Golden values: a silent change of the formula would roll every opted-in workload of every
// cluster that upgrades. Each was computed independently: sha256sum of the JSON in its comment,
// the first two are the vectors.
func TestWaveHashGolden(t *testing.T) {
	appConfig := cmObj("app-config", map[string]string{"key": "value"}, nil)
	appSecret := secretObj("app-secret", map[string][]byte{"password": []byte("s3cr3t")})
	tests := []struct {
		name   string
		format HashFormat
		uses   podrefs.Uses
		get    GetFunc
		want   string
	}{
		{name: "issue vector: one ConfigMap and one Secret", format: HashWave,
			uses: merge(all(configref.ConfigMap, "app-config", true), all(configref.Secret, "app-secret", true)), get: objects(appConfig, appSecret),
			want: "509f50320b71c3be0073e8a3287f839fedcb86af881fa801d7c2622bea259201"},
		{name: "issue vector: no references", format: HashWave, uses: podrefs.Uses{}, get: objects(),
			want: "100444e91862dd77d7ebe29f050c1e9a7f357c771e1a7b7650aae27e6a3a031d"},
		{name: "no references in the v0.5 format is the same JSON", format: HashWaveV05, uses: podrefs.Uses{}, get: objects(),
			want: "100444e91862dd77d7ebe29f050c1e9a7f357c771e1a7b7650aae27e6a3a031d"},
		// {"configMaps":{"app-config":{"key":"value"}},"secrets":{"app-secret":{"password":"czNjcjN0"}}}
		{name: "v0.5 format: ConfigMap values as strings", format: HashWaveV05,
			uses: merge(all(configref.ConfigMap, "app-config", true), all(configref.Secret, "app-secret", true)), get: objects(appConfig, appSecret),
			want: "0c38a0016d34e0c9d2a63eb128968d437eeb8891a0305dcae1b0f782407b5b5d"},
		// {"configMaps":{"bin":{"a":"MQ==","b":"AAE="}},"secrets":{}}
		{name: "binaryData merged with data", format: HashWave,
			uses: all(configref.ConfigMap, "bin", true), get: objects(cmObj("bin", map[string]string{"a": "1"}, map[string][]byte{"b": {0, 1}})),
			want: "cbc0e1d9d6f0fe8d5fad5cbeb719f5a803da8553eb099ed5be7f59566fb80eb5"},
		{name: "missing optional object is left out", format: HashWave,
			uses: merge(all(configref.ConfigMap, "app-config", true), all(configref.Secret, "app-secret", true), all(configref.ConfigMap, "gone", false)), get: objects(appConfig, appSecret),
			want: "509f50320b71c3be0073e8a3287f839fedcb86af881fa801d7c2622bea259201"},
		{name: "single key picks only that key", format: HashWave,
			uses: podrefs.Uses{configref.Ref{Kind: configref.ConfigMap, Namespace: "ns", Name: "app-config"}: {Keys: map[string]bool{"key": true}, Required: true}, configref.Ref{Kind: configref.Secret, Namespace: "ns", Name: "app-secret"}: {AllKeys: true, Required: true}},
			get:  objects(cmObj("app-config", map[string]string{"key": "value", "other": "x"}, nil), appSecret),
			want: "509f50320b71c3be0073e8a3287f839fedcb86af881fa801d7c2622bea259201"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := WaveHash(tt.format, tt.uses, tt.get)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Golden values per Wave release line, each printed by Wave's own calculateConfigHash at the
// tag named (a test file added to pkg/core of a checkout at v0.6.0, v0.7.2 and v0.9.0; hash.go
// is the same from v0.9.0 to wave-4.5.0, and at v0.8.0 as at v0.7.2). A workload adopted
// from any of them rolls nothing when its hash is one of these (AdoptableFormats).
func TestWaveHashGoldenPerRelease(t *testing.T) {
	appConfig := cmObj("app-config", map[string]string{"key": "value"}, nil)
	appSecret := secretObj("app-secret", map[string][]byte{"password": []byte("s3cr3t")})
	vectors := []struct {
		name string
		uses podrefs.Uses
		get  GetFunc
		want map[HashFormat]string
	}{
		{"a ConfigMap and a Secret", merge(all(configref.ConfigMap, "app-config", true), all(configref.Secret, "app-secret", true)), objects(appConfig, appSecret), map[HashFormat]string{
			HashWaveV05: "0c38a0016d34e0c9d2a63eb128968d437eeb8891a0305dcae1b0f782407b5b5d",
			HashWaveV07: "509f50320b71c3be0073e8a3287f839fedcb86af881fa801d7c2622bea259201",
			HashWave:    "509f50320b71c3be0073e8a3287f839fedcb86af881fa801d7c2622bea259201"}},
		{"an empty Secret: null up to 0.8, {} from 0.9", all(configref.Secret, "empty", true), objects(secretObj("empty", nil)), map[HashFormat]string{
			HashWaveV05: "bf0eed4c6c1d464e6ce7c940b12b2c58f8f3cbb99cd78ef2096317250803e933",
			HashWaveV07: "bf0eed4c6c1d464e6ce7c940b12b2c58f8f3cbb99cd78ef2096317250803e933",
			HashWave:    "f9f28258a3538ff33935539dca59e8ccb4444c5b6eb0f76f600b4a49b1d7eae4"}},
		{"binaryData: left out up to 0.6", all(configref.ConfigMap, "bin", true), objects(cmObj("bin", map[string]string{"a": "1"}, map[string][]byte{"b": {0, 1}})), map[HashFormat]string{
			HashWaveV05: "88a902a4dcdb955b02b939b3fb16f5868739f620f96c848c2afe66fca9a5deba",
			HashWaveV07: "cbc0e1d9d6f0fe8d5fad5cbeb719f5a803da8553eb099ed5be7f59566fb80eb5",
			HashWave:    "cbc0e1d9d6f0fe8d5fad5cbeb719f5a803da8553eb099ed5be7f59566fb80eb5"}},
		{"an empty ConfigMap: null up to 0.6", all(configref.ConfigMap, "empty", true), objects(cmObj("empty", nil, nil)), map[HashFormat]string{
			HashWaveV05: "b0bcf7497b85c0f3a50a4423e8284ff6f9df25cbfe9d0eb3a293f215277d8abb",
			HashWaveV07: "17b86b9962b7c56a25dc449fa3eacce8aa03cb2d971bf407797f7d90782b22e3",
			HashWave:    "17b86b9962b7c56a25dc449fa3eacce8aa03cb2d971bf407797f7d90782b22e3"}},
		{"one key and then all keys of one ConfigMap: all (0.9 merges the references)",
			podrefs.Uses{configref.Ref{Kind: configref.ConfigMap, Namespace: "ns", Name: "app-config"}: {AllKeys: true, Keys: map[string]bool{"key": true}, Required: true}},
			objects(cmObj("app-config", map[string]string{"key": "value", "other": "x"}, nil)), map[HashFormat]string{
				HashWave: "098aabd3d647389d2d44a431132b0125b75e6f6866bb30872b2b6e03275025d0"}},
	}
	for _, v := range vectors {
		for format, want := range v.want {
			t.Run(v.name+"/"+string(format), func(t *testing.T) {
				got, err := WaveHash(format, v.uses, v.get)
				require.NoError(t, err)
				assert.Equal(t, want, got)
			})
		}
	}
	assert.ElementsMatch(t, []HashFormat{HashWave, HashWaveV07, HashWaveV05}, AdoptableFormats)
}

func TestWaveHashMissingRequired(t *testing.T) {
	_, err := WaveHash(HashWave, all(configref.ConfigMap, "gone", true), objects())
	var missing *podrefs.MissingError
	require.ErrorAs(t, err, &missing)
	assert.Equal(t, "gone", missing.Ref.Name)

	uses := podrefs.Uses{configref.Ref{Kind: configref.ConfigMap, Namespace: "ns", Name: "app"}: {Keys: map[string]bool{"k": true}, Required: true, Where: `container "app" env K`}}
	_, err = WaveHash(HashWave, uses, objects(cmObj("app", map[string]string{"other": "1"}, nil)))
	require.ErrorAs(t, err, &missing)
	assert.Equal(t, `key "k" of configmap ns/app (used by container "app" env K) not found`, err.Error())
}

// HMAC-SHA256 of the first issue vector's JSON under the key "configwave-test-key", computed
// independently (Python's hmac module).
func TestKeyedWaveHashGolden(t *testing.T) {
	uses := merge(all(configref.ConfigMap, "app-config", true), all(configref.Secret, "app-secret", true))
	get := objects(cmObj("app-config", map[string]string{"key": "value"}, nil), secretObj("app-secret", map[string][]byte{"password": []byte("s3cr3t")}))
	got, err := KeyedWaveHash(HashWave, []byte("configwave-test-key"), uses, get)
	require.NoError(t, err)
	assert.Equal(t, "8bb1e5dd39ee4baf505511d7b11322b25b0aca6fa1b7e2d4c2f1bb0b1de0695a", got)
	plain, err := KeyedWaveHash(HashWave, nil, uses, get)
	require.NoError(t, err)
	assert.Equal(t, "509f50320b71c3be0073e8a3287f839fedcb86af881fa801d7c2622bea259201", plain, "no key: Wave's value")
}

func TestKeyedDigests(t *testing.T) {
	s := secretObj("s", map[string][]byte{"password": []byte("s3cr3t")})
	plain, _ := Digester{}.Transform(s)
	keyed, _ := Digester{Key: []byte("0123456789abcdef")}.Transform(s)
	again, _ := Digester{Key: []byte("0123456789abcdef")}.Transform(s)
	other, _ := Digester{Key: []byte("fedcba9876543210")}.Transform(s)
	d := func(o any) string { return KeyDigests(o)["password"] }
	assert.NotEqual(t, d(plain), d(keyed))
	assert.Equal(t, d(keyed), d(again), "deterministic for one key")
	assert.NotEqual(t, d(keyed), d(other))
}
