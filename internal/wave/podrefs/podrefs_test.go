package podrefs

import (
	"strings"
	"testing"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

func ptr[T any](v T) *T { return &v }

func cmRef(name string) configref.Ref {
	return configref.Ref{Kind: configref.ConfigMap, Namespace: "ns", Name: name}
}

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
	refs, problems := ParseExtra(configref.ConfigMap, "ns", "a, b/c,a ,../x,b/C")
	assert.Equal(t, []configref.Ref{cmRef("a"), {Kind: configref.ConfigMap, Namespace: "b", Name: "c"}}, refs)
	require.Len(t, problems, 2)
	assert.Contains(t, problems[0], `entry "../x"`)
	assert.Contains(t, problems[1], `"C" is not a valid configmap name`)
}

func FuzzParseExtra(f *testing.F) {
	for _, s := range []string{"a,b", "ns/a", " , ", "a/b/c", "../..", "a,,b", "x.y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		refs, _ := ParseExtra(configref.Secret, "default", s)
		seen := map[configref.Ref]bool{}
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

func TestDropOtherNamespaces(t *testing.T) {
	spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "own"}}}}}}}
	used := Extract("ns", map[string]string{ExtraSecretsAnnotation: "other/creds, local", ExtraConfigMapsAnnotation: "third/x"}, spec)
	dropped := used.DropOtherNamespaces("ns")
	assert.Equal(t, map[configref.Ref]string{
		{Kind: configref.Secret, Namespace: "other", Name: "creds"}: "annotation " + ExtraSecretsAnnotation,
		{Kind: configref.ConfigMap, Namespace: "third", Name: "x"}:  "annotation " + ExtraConfigMapsAnnotation,
	}, dropped)
	assert.Equal(t, []string{"configmap ns/own=all required", "secret ns/local=all"}, summary(used.Visible))
	assert.Equal(t, []string{"configmap ns/own=all required", "secret ns/local=all"}, summary(used.Wave))
}

func TestIgnored(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		want        bool
	}{
		{nil, false},
		{map[string]string{IgnoreAnnotation: "true"}, true},
		{map[string]string{StakaterIgnore: "true"}, true},
		{map[string]string{IgnoreAnnotation: "false", StakaterIgnore: "no"}, false},
		{map[string]string{IgnoreAnnotation: " True "}, true},
	} {
		assert.Equal(t, tc.want, Ignored(tc.annotations, StakaterDialect{}), "%v", tc.annotations)
	}
	renamed := StakaterDialect{Names: DefaultStakaterNames}
	renamed.Names.Ignore = "example.com/skip"
	assert.True(t, Ignored(map[string]string{"example.com/skip": "true"}, renamed), "Reloader's --ignore-annotation")
	assert.False(t, Ignored(map[string]string{StakaterIgnore: "true"}, renamed), "the default name no longer counts once renamed, as in Reloader")

	r := References{Visible: Uses{}, Wave: Uses{}}
	a, b, c := configref.Ref{Kind: configref.ConfigMap, Namespace: "ns", Name: "a"}, configref.Ref{Kind: configref.Secret, Namespace: "ns", Name: "b"}, configref.Ref{Kind: configref.ConfigMap, Namespace: "ns", Name: "c"}
	r.Visible[a], r.Visible[b], r.Wave[b], r.Wave[c] = &Use{}, &Use{}, &Use{}, &Use{}
	dropped := r.DropIgnored(func(o configref.Ref) bool { return o != a })
	assert.Equal(t, sets.New(b, c), dropped)
	assert.Equal(t, []configref.Ref{a}, r.Visible.Refs())
	assert.Empty(t, r.Wave)
}

func TestAllIsBothViewsSortedOnce(t *testing.T) {
	a, b, c := cmRef("a"), configref.Ref{Kind: configref.Secret, Namespace: "ns", Name: "b"}, cmRef("c")
	r := References{Visible: Uses{c: {}, b: {}}, Wave: Uses{b: {}, a: {}}}
	assert.Equal(t, []configref.Ref{a, c, b}, r.All())
	assert.Empty(t, References{}.All())
}
