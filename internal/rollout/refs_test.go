package rollout

import (
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func ptr[T any](v T) *T { return &v }

func cmRef(name string) ObjectRef { return ObjectRef{ConfigMap, "ns", name} }

// summary renders Uses compactly: "configmap ns/a=all!" ("!" required), "...=k1!,k2".
func summary(us Uses) []string {
	var out []string
	for _, r := range us.Refs() {
		u := us[r]
		s := r.String() + "="
		if u.AllKeys {
			s += "all"
		}
		var keys []string
		for k, req := range u.Keys {
			if req {
				k += "!"
			}
			keys = append(keys, k)
		}
		sortStrings(keys)
		if len(keys) > 0 {
			if u.AllKeys {
				s += "+"
			}
			s += strings.Join(keys, ",")
		}
		if u.Required {
			s += " required"
		}
		out = append(out, s)
	}
	return out
}

func sortStrings(s []string) {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
}

func mount(name string) corev1.VolumeMount {
	return corev1.VolumeMount{Name: name, MountPath: "/" + name}
}

func TestExtract(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		spec        corev1.PodSpec
		visible     []string
		wave        []string
		problems    int
	}{
		{
			name: "configMap volume: pods see all keys",
			spec: corev1.PodSpec{
				Volumes:    []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}}}}},
				Containers: []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{mount("cfg")}}},
			},
			visible: []string{"configmap ns/a=all required"},
			wave:    []string{"configmap ns/a=all required"},
		},
		{
			name: "volume with items: pods see only those keys, Wave hashes all",
			spec: corev1.PodSpec{
				Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls",
					Items: []corev1.KeyToPath{{Key: "tls.crt", Path: "crt"}}}}}},
				Containers: []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{mount("s")}}},
			},
			visible: []string{"secret ns/tls=tls.crt! required"},
			wave:    []string{"secret ns/tls=all required"},
		},
		{
			name: "volume nobody mounts: pods see nothing, Wave still hashes it",
			spec: corev1.PodSpec{
				Volumes:    []corev1.Volume{{Name: "unused", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}}}}},
				Containers: []corev1.Container{{Name: "app"}},
			},
			visible: nil,
			wave:    []string{"configmap ns/a=all required"},
		},
		{
			name: "projected sources with and without items, optional",
			spec: corev1.PodSpec{
				Volumes: []corev1.Volume{{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}, Items: []corev1.KeyToPath{{Key: "k", Path: "k"}}}},
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Optional: ptr(true)}},
				}}}}},
				Containers: []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{mount("p")}}},
			},
			visible: []string{"configmap ns/a=k! required", "secret ns/s=all"},
			wave:    []string{"configmap ns/a=k! required", "secret ns/s=all"},
		},
		{
			name: "env valueFrom and envFrom in containers",
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app",
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "env"}}}},
				Env: []corev1.EnvVar{
					{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}, Key: "k"}}},
					{Name: "P", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password", Optional: ptr(true)}}},
					{Name: "PLAIN", Value: "x"},
				}}}},
			visible: []string{"configmap ns/a=k! required", "configmap ns/env=all required", "secret ns/db=password"},
			wave:    []string{"configmap ns/a=k! required", "configmap ns/env=all required", "secret ns/db=password"},
		},
		{
			name: "init containers: pods see them, Wave does not",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "migrate", Env: []corev1.EnvVar{{Name: "DSN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "dsn"}}}}}},
				Containers:     []corev1.Container{{Name: "app"}},
			},
			visible: []string{"secret ns/db=dsn! required"},
			wave:    nil,
		},
		{
			name: "one object used whole and by one key: all keys, required wins",
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app",
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}, Optional: ptr(true)}}},
				Env:     []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}, Key: "k"}}}},
			}}},
			visible: []string{"configmap ns/a=all+k! required"},
			wave:    []string{"configmap ns/a=all+k! required"},
		},
		{
			name:        "extra annotations: optional, every key, ns/name allowed, bad entries reported",
			annotations: map[string]string{ExtraConfigMapsAnnotation: " one, other/two ,,", ExtraSecretsAnnotation: "Bad_Name,s"},
			spec:        corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
			visible:     []string{"configmap ns/one=all", "configmap other/two=all", "secret ns/s=all"},
			wave:        []string{"configmap ns/one=all", "configmap other/two=all", "secret ns/s=all"},
			problems:    1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refs := Extract("ns", tt.annotations, &tt.spec)
			assert.Equal(t, tt.visible, summary(refs.Visible), "visible")
			assert.Equal(t, tt.wave, summary(refs.Wave), "wave")
			assert.Len(t, refs.Problems, tt.problems)
		})
	}
}

func TestParseExtra(t *testing.T) {
	refs, problems := ParseExtra(ConfigMap, "ns", "a, b/c,a ,../x,b/C")
	assert.Equal(t, []ObjectRef{cmRef("a"), {ConfigMap, "b", "c"}}, refs)
	require.Len(t, problems, 2)
	assert.Contains(t, problems[0], `entry "../x"`)
	assert.Contains(t, problems[1], `"C" is not a valid configmap name`)
}

func FuzzParseExtra(f *testing.F) {
	for _, s := range []string{"a,b", "ns/a", " , ", "a/b/c", "../..", "a,,b", "x.y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		refs, _ := ParseExtra(Secret, "default", s)
		seen := map[ObjectRef]bool{}
		for _, r := range refs {
			require.NotEmpty(t, r.Name)
			require.NotEmpty(t, r.Namespace)
			require.NotContains(t, r.Name, "/")
			require.NotContains(t, r.Name, ",")
			require.False(t, seen[r], "duplicate %v", r)
			seen[r] = true
		}
	})
}

func TestDigestTransform(t *testing.T) {
	cm := cmObj("a", map[string]string{"k": "value"}, map[string][]byte{"b": {1}})
	cm.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 10000)}
	out, err := Digest(cm)
	require.NoError(t, err)
	d := out.(*corev1.ConfigMap)
	assert.NotContains(t, d.Data["k"], "value")
	assert.Len(t, d.Data, 2)
	assert.NotContains(t, d.Annotations, "kubectl.kubernetes.io/last-applied-configuration", "big annotations are dropped")
	again, err := Digest(d)
	require.NoError(t, err)
	assert.Equal(t, d, again, "a second transform changes nothing")

	other := cmObj("a", map[string]string{"k": "value2"}, map[string][]byte{"b": {1}})
	out2, _ := Digest(other)
	assert.NotEqual(t, d.Data["k"], out2.(*corev1.ConfigMap).Data["k"])
	assert.Equal(t, d.Data["b"], out2.(*corev1.ConfigMap).Data["b"])

	s, err := Digest(secretObj("s", map[string][]byte{"password": []byte("s3cr3t")}))
	require.NoError(t, err)
	assert.NotContains(t, string(s.(*corev1.Secret).Data["password"]), "s3cr3t")
}

func TestInputsOf(t *testing.T) {
	digests := func(r ObjectRef) (map[string]string, bool) {
		switch r {
		case cmRef("a"):
			return map[string]string{"k": "d1", "other": "d2"}, true
		}
		return nil, false
	}
	oneKey := Uses{cmRef("a"): {Keys: map[string]bool{"k": true}, Required: true}}
	in := InputsOf("ns", oneKey, digests)
	assert.Empty(t, in.Missing)
	assert.Regexp(t, `^configmap/a=[0-9a-f]{16}$`, in.Value)

	// Another key's digest changes: the single-key inputs do not.
	digests2 := func(r ObjectRef) (map[string]string, bool) {
		return map[string]string{"k": "d1", "other": "CHANGED"}, r == cmRef("a")
	}
	assert.Equal(t, in.Value, InputsOf("ns", oneKey, digests2).Value)
	allKeys := Uses{cmRef("a"): {AllKeys: true, Required: true}}
	assert.NotEqual(t, InputsOf("ns", allKeys, digests).Value, InputsOf("ns", allKeys, digests2).Value)

	// Optional absent object: recorded as absent, not missing; its creation changes the value.
	opt := Uses{cmRef("later"): {AllKeys: true}}
	absent := InputsOf("ns", opt, digests)
	assert.Empty(t, absent.Missing)
	assert.Equal(t, "configmap/later=absent", absent.Value)

	// Required absent object and required absent key are missing.
	req := Uses{cmRef("gone"): {AllKeys: true, Required: true, Where: `container "app" envFrom`}, cmRef("a"): {Keys: map[string]bool{"nokey": true}, Required: true}}
	m := InputsOf("ns", req, digests)
	require.Len(t, m.Missing, 2)

	// Other namespaces are spelled out.
	assert.Equal(t, "configmap/other/x=absent", InputsOf("ns", Uses{{ConfigMap, "other", "x"}: {AllKeys: true}}, digests).Value)
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

func TestIndex(t *testing.T) {
	i := NewIndex()
	i.Set("Deployment/ns/a", []ObjectRef{cmRef("shared"), cmRef("a")})
	i.Set("Deployment/ns/b", []ObjectRef{cmRef("shared")})
	assert.ElementsMatch(t, []string{"Deployment/ns/a", "Deployment/ns/b"}, i.Users(cmRef("shared")))
	i.Set("Deployment/ns/a", []ObjectRef{cmRef("a")})
	assert.Equal(t, []string{"Deployment/ns/b"}, i.Users(cmRef("shared")))
	i.Delete("Deployment/ns/b")
	assert.Empty(t, i.Users(cmRef("shared")))
	assert.Equal(t, 1, i.Workloads())
	assert.Equal(t, 1, i.Configs(), "nothing left behind for deleted workloads")
}
