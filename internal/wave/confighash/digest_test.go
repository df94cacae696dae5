package confighash

import (
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/podrefs"
)

func cmRef(name string) configref.Ref {
	return configref.Ref{Kind: configref.ConfigMap, Namespace: "ns", Name: name}
}

func TestDigestTransform(t *testing.T) {
	cm := cmObj("a", map[string]string{"k": "value"}, map[string][]byte{"b": {1}})
	cm.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 10000), podrefs.StakaterMatch: "true"}
	cm.Labels = map[string]string{"team": "web"}
	out, err := Digest(cm)
	require.NoError(t, err)
	d := out.(*Digested)
	assert.Equal(t, map[string]string{podrefs.StakaterMatch: "true"}, d.GetAnnotations(), "only Reloader's match and ignore are kept")
	assert.Nil(t, d.GetLabels(), "labels only with KeepLabels")
	assert.Equal(t, []string{"b", "k"}, []string{d.Keys[0].Key, d.Keys[1].Key}, "keys sorted")
	assert.Equal(t, "ns/a", d.Namespace+"/"+d.Name)
	assert.Equal(t, cm.ResourceVersion, d.ResourceVersion)
	digests := d.Digests()
	assert.Len(t, digests, 2)
	assert.Regexp(t, `^[0-9a-f]{32}$`, digests["k"])
	again, err := Digest(d)
	require.NoError(t, err)
	assert.Same(t, d, again, "a second transform changes nothing")

	other := cmObj("a", map[string]string{"k": "value2"}, map[string][]byte{"b": {1}})
	out2, _ := Digest(other)
	assert.NotEqual(t, digests["k"], KeyDigests(out2)["k"])
	assert.Equal(t, digests["b"], KeyDigests(out2)["b"])
	assert.False(t, d.SameKeys(out2.(*Digested)))
	same, _ := Digest(cmObj("a", map[string]string{"k": "value"}, map[string][]byte{"b": {1}}))
	assert.True(t, d.SameKeys(same.(*Digested)))

	labelled, _ := Digester{KeepLabels: true}.Transform(cm)
	assert.Equal(t, map[string]string{"team": "web"}, labelled.(*Digested).GetLabels())

	s, err := Digest(secretObj("s", map[string][]byte{"password": []byte("s3cr3t")}))
	require.NoError(t, err)
	assert.NotContains(t, KeyDigests(s)["password"], "s3cr3t")
	// A digest is the first 128 bits of SHA256 of the value, in hex: what records hold.
	assert.Equal(t, "4e738ca5563c06cfd0018299933d58db", KeyDigests(s)["password"])
}

func TestInputsOf(t *testing.T) {
	digests := func(r configref.Ref) (map[string]string, bool) {
		switch r {
		case cmRef("a"):
			return map[string]string{"k": "d1", "other": "d2"}, true
		}
		return nil, false
	}
	oneKey := podrefs.Uses{cmRef("a"): {Keys: map[string]bool{"k": true}, Required: true}}
	in := InputsOf("ns", oneKey, digests)
	assert.Empty(t, in.Missing)
	assert.Regexp(t, `^configmap/a=[0-9a-f]{16}$`, in.Value)

	// Another key's digest changes: the single-key inputs do not.
	digests2 := func(r configref.Ref) (map[string]string, bool) {
		return map[string]string{"k": "d1", "other": "CHANGED"}, r == cmRef("a")
	}
	assert.Equal(t, in.Value, InputsOf("ns", oneKey, digests2).Value)
	allKeys := podrefs.Uses{cmRef("a"): {AllKeys: true, Required: true}}
	assert.NotEqual(t, InputsOf("ns", allKeys, digests).Value, InputsOf("ns", allKeys, digests2).Value)

	// Optional absent object: recorded as absent, not missing; its creation changes the value.
	opt := podrefs.Uses{cmRef("later"): {AllKeys: true}}
	absent := InputsOf("ns", opt, digests)
	assert.Empty(t, absent.Missing)
	assert.Equal(t, "configmap/later=absent", absent.Value)

	// Required absent object and required absent key are missing.
	req := podrefs.Uses{cmRef("gone"): {AllKeys: true, Required: true, Where: `container "app" envFrom`}, cmRef("a"): {Keys: map[string]bool{"nokey": true}, Required: true}}
	m := InputsOf("ns", req, digests)
	require.Len(t, m.Missing, 2)

	// Other namespaces are spelled out.
	assert.Equal(t, "configmap/other/x=absent", InputsOf("ns", podrefs.Uses{{Kind: configref.ConfigMap, Namespace: "other", Name: "x"}: {AllKeys: true}}, digests).Value)
	assert.Equal(t, []string{"configmap/a", "configmap/b"}, Changed(map[string]string{"configmap/a": "1", "configmap/b": "2"}, map[string]string{"configmap/a": "3"}))
}

func TestDescribeChanged(t *testing.T) {
	for _, tc := range []struct {
		changed []string
		want    string
	}{
		{[]string{"configmap/a"}, "configmap/a"},
		{[]string{"configmap/a", "secret/other/b"}, "configmap/a, secret/other/b"},
		{[]string{"configmap/a", "configmap/b", "configmap/c", "configmap/d", "configmap/e", "configmap/f", "configmap/g"}, "configmap/a, configmap/b, configmap/c, configmap/d, configmap/e and 2 more"},
		// Entries only in a hand-edited record are counted, never repeated into an Event.
		{[]string{"configmap/a", "<script>", "configmap/UPPER", "pod/x", "configmap/a/b/c"}, "configmap/a and 4 more"},
		{[]string{strings.Repeat("x", 5000)}, "an entry of the inputs record"},
		{[]string{"x", "y"}, "2 entries of the inputs record"},
		{nil, "the inputs record"},
	} {
		assert.Equal(t, tc.want, DescribeChanged(tc.changed), "%q", tc.changed)
	}
}

// The inputs record is read back from the workload's annotations, which anyone who may edit
// the workload can write.
func FuzzParseInputs(f *testing.F) {
	f.Add("configmap/a=0123456789abcdef,secret/other/b=absent", "configmap/a=fedcba9876543210")
	f.Add("", "=")
	f.Add(",,,=,==", "configmap/a==x")
	f.Fuzz(func(t *testing.T, recorded, current string) {
		before, after := ParseInputs(recorded), ParseInputs(current)
		for name, d := range before {
			assert.Contains(t, recorded, name+"="+d)
		}
		changed := Changed(before, after)
		assert.True(t, sort.StringsAreSorted(changed))
		if recorded == current {
			assert.Empty(t, changed)
		}
		msg := DescribeChanged(changed)
		assert.LessOrEqual(t, len(msg), maxNamedChanges*(len("configmap/")+63+1+253+2)+40, "an Event message stays bounded")
		for _, part := range strings.Split(strings.SplitN(msg, " and ", 2)[0], ", ") {
			if strings.Contains(part, "/") {
				assert.True(t, validEntryName(part), "only well-formed names reach an Event: %q", part)
			}
		}
	})
}

func TestKeyIDInRecords(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	id := KeyID(key)
	assert.Regexp(t, `^[0-9a-f]{8}$`, id)
	assert.NotEqual(t, id, KeyID([]byte("another key of thirty-two bytes!")))
	assert.Empty(t, KeyID(nil))
	for _, tc := range []struct{ id, inputs, record string }{
		{"", "configmap/a=0011", "configmap/a=0011"},
		{"", "", ""},
		{id, "configmap/a=0011,secret/b=absent", "key=" + id + ",configmap/a=0011,secret/b=absent"},
		{id, "", "key=" + id},
	} {
		assert.Equal(t, tc.record, WithKeyID(tc.id, tc.inputs))
		gotID, gotInputs := SplitKeyID(tc.record)
		assert.Equal(t, tc.id, gotID)
		assert.Equal(t, tc.inputs, gotInputs)
	}
	// A workload whose template hash is keyed says so after the key id.
	for _, tc := range []struct {
		id     string
		keyed  bool
		inputs string
		record string
	}{
		{id, true, "configmap/a=0011", "key=" + id + ",hash=keyed,configmap/a=0011"},
		{id, true, "", "key=" + id + ",hash=keyed"},
		{id, false, "configmap/a=0011", "key=" + id + ",configmap/a=0011"},
		{"", true, "configmap/a=0011", "configmap/a=0011"}, // no key, nothing to key the hash with
	} {
		assert.Equal(t, tc.record, RecordValue(tc.id, tc.keyed, tc.inputs))
		gotID, gotKeyed, gotInputs := SplitRecord(tc.record)
		assert.Equal(t, tc.id, gotID)
		assert.Equal(t, tc.keyed && tc.id != "", gotKeyed)
		assert.Equal(t, tc.inputs, gotInputs)
		assert.NotContains(t, ParseInputs(gotInputs), "hash", "the mark is never an entry")
	}
}
