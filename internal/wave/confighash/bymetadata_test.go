package confighash

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configwave/configwave/internal/kube/configref"
)

// Without an install key, a Secret's digests are made of who it is and which version, never of
// its value: two values under the same uid and resourceVersion (impossible in the API, which
// is the point: nothing of the value enters) give the same digests, and any new version gives
// new ones.
func TestSecretsByMetadataDigests(t *testing.T) {
	secret := func(uid, rv, value string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", UID: types.UID(uid), ResourceVersion: rv},
			Data: map[string][]byte{"password": []byte(value), "user": []byte("admin")}}
	}
	byMeta := Digester{SecretsByMetadata: true}
	digests := func(dg Digester, o any) map[string]string {
		d, err := dg.Transform(o)
		require.NoError(t, err)
		return KeyDigests(d)
	}
	base := digests(byMeta, secret("u1", "7", "s3cr3t"))
	tests := []struct {
		name string
		dg   Digester
		obj  any
		same bool
	}{
		{"another value, same uid and resourceVersion: the same digests", byMeta, secret("u1", "7", "hunter2"), true},
		{"another resourceVersion, same value (a metadata-only write): new digests", byMeta, secret("u1", "8", "s3cr3t"), false},
		{"another uid (deleted and made again): new digests", byMeta, secret("u2", "7", "s3cr3t"), false},
		{"a plain digest is of the value", Digester{}, secret("u1", "7", "s3cr3t"), false},
		{"with a key, the key decides: HMACs of the values", Digester{Key: []byte("0123456789abcdef"), SecretsByMetadata: true}, secret("u1", "7", "s3cr3t"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := digests(tt.dg, tt.obj)
			assert.Equal(t, []string{"password", "user"}, slices.Sorted(maps.Keys(got)), "the keys are the Secret's: a key's absence still shows")
			if tt.same {
				assert.Equal(t, base, got)
			} else {
				assert.NotEqual(t, base["password"], got["password"])
			}
		})
	}
	assert.NotEqual(t, base["password"], base["user"], "each key its own digest")

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u3", ResourceVersion: "9"}, Data: map[string]string{"k": "v"}}
	assert.Equal(t, digests(Digester{}, cm), digests(byMeta, cm), "a ConfigMap keeps the digests of its values")
	cm2 := cm.DeepCopy()
	cm2.ResourceVersion = "10"
	assert.Equal(t, digests(byMeta, cm), digests(byMeta, cm2), "and a metadata-only write of it changes nothing")
}

// The record a reader of the workload sees, made without a key, holds nothing that tests a
// guess of the Secret's value: no SHA-256 or HMAC of it, no entry a guess's record would have,
// and the template hash made from it is not Wave's formula of the data.
func TestSecretsByMetadataRecordTestsNoGuess(t *testing.T) {
	const value = "s3cr3t"
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", UID: "0b5c", ResourceVersion: "41"},
		Data: map[string][]byte{"password": []byte(value)}}
	uses := merge(all(configref.Secret, "s", true), all(configref.ConfigMap, "c", true))
	cm := cmObj("c", map[string]string{"k": "v"}, nil)
	inputsWith := func(dg Digester, secret *corev1.Secret) Inputs {
		return InputsOf("ns", uses, func(r configref.Ref) (map[string]string, bool) {
			var o any = cm
			if r.Kind == configref.Secret {
				o = secret
			}
			d, err := dg.Transform(o)
			require.NoError(t, err)
			return KeyDigests(d), true
		})
	}
	byMeta := inputsWith(Digester{SecretsByMetadata: true}, s)
	record := RecordValue(MetaID, true, byMeta.Value)

	sum := sha256.Sum256([]byte(value))
	mac := hmac.New(sha256.New, []byte(value))
	guess := s.DeepCopy()
	guess.Data["password"] = []byte(value) // the right guess
	for what, digest := range map[string]string{
		"SHA-256 of the value":                    hex.EncodeToString(sum[:]),
		"its first 128 bits (a plain key digest)": hex.EncodeToString(sum[:16]),
		"its first 64 bits":                       hex.EncodeToString(sum[:8]),
		"an HMAC keyed with the value":            hex.EncodeToString(mac.Sum(nil))[:16],
		"the entry of the right guess's record":   inputsWith(Digester{}, guess).Objects["secret/s"],
	} {
		assert.NotContains(t, record, digest, what)
	}
	assert.Equal(t, inputsWith(Digester{}, guess).Objects["configmap/c"], byMeta.Objects["configmap/c"], "the ConfigMap's entry is of its values")

	other := s.DeepCopy()
	other.Data["password"] = []byte("another value")
	assert.Equal(t, byMeta.Value, inputsWith(Digester{SecretsByMetadata: true}, other).Value, "the value is not in the record")
	written := s.DeepCopy()
	written.ResourceVersion = "42"
	assert.NotEqual(t, byMeta.Objects["secret/s"], inputsWith(Digester{SecretsByMetadata: true}, written).Objects["secret/s"], "a write is")

	wave, err := WaveHash(HashWave, uses, objects(cm, s))
	require.NoError(t, err)
	own := HashOfInputs(byMeta.Value)
	assert.Regexp(t, `^[0-9a-f]{64}$`, own)
	assert.NotEqual(t, wave, own, "the template hash is not Wave's formula of the data")
	assert.Equal(t, own, HashOfInputs(inputsWith(Digester{SecretsByMetadata: true}, other).Value), "nor of the value at all")
}

func TestMetaRecords(t *testing.T) {
	for _, tc := range []struct {
		id      string
		ownHash bool
		inputs  string
		record  string
	}{
		{MetaID, false, "configmap/a=0011,secret/b=22", "secrets=meta,configmap/a=0011,secret/b=22"},
		{MetaID, true, "configmap/a=0011", "secrets=meta,hash=inputs,configmap/a=0011"},
		{MetaID, true, "", "secrets=meta,hash=inputs"},
		{MetaID, false, "", "secrets=meta"},
	} {
		assert.Equal(t, tc.record, RecordValue(tc.id, tc.ownHash, tc.inputs))
		id, own, inputs := SplitRecord(tc.record)
		assert.Equal(t, tc.id, id)
		assert.Equal(t, tc.ownHash, own)
		assert.Equal(t, tc.inputs, inputs)
		assert.NotContains(t, ParseInputs(inputs), "secrets", "the head is never an entry")
	}
	assert.NotEqual(t, MetaID, KeyID([]byte("0123456789abcdef0123456789abcdef")))
	// A record made in one mode and read in another keeps its workload off Wave's formula.
	_, own, _ := SplitRecord("key=0a1b2c3d,hash=keyed,configmap/a=1")
	assert.True(t, own)
	_, own, _ = SplitRecord("key=0a1b2c3d,hash=inputs,configmap/a=1")
	assert.True(t, own)
}
