package revisions

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/kube/configref"
)

var (
	cmApp  = configref.Ref{Kind: configref.ConfigMap, Namespace: "shop", Name: "app"}
	secDB  = configref.Ref{Kind: configref.Secret, Namespace: "shop", Name: "db"}
	onShop = Snapshots{cmApp: "app-0123456789", secDB: "db-abcdef0123"}
)

// Every place of a pod spec that names a ConfigMap or Secret, each on its own.
func TestRewriteEveryPlace(t *testing.T) {
	cmKey := &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Key: "k"}
	secKey := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "k"}
	envs := []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: cmKey}}, {Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: secKey}}}
	envFrom := []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}, {SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}}
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want []Op
	}{
		{"configMap volume", corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}}},
			[]Op{{"replace", "/spec/volumes/0/configMap/name", "app-0123456789"}}},
		{"secret volume", corev1.PodSpec{Volumes: []corev1.Volume{{Name: "x"}, {Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}}}},
			[]Op{{"replace", "/spec/volumes/1/secret/secretName", "db-abcdef0123"}}},
		{"projected sources", corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "t"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}},
		}}}}}},
			[]Op{{"replace", "/spec/volumes/0/projected/sources/1/configMap/name", "app-0123456789"}, {"replace", "/spec/volumes/0/projected/sources/2/secret/name", "db-abcdef0123"}}},
		{"container envFrom and env valueFrom", corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b", EnvFrom: envFrom, Env: envs}}},
			[]Op{{"replace", "/spec/containers/1/envFrom/0/configMapRef/name", "app-0123456789"}, {"replace", "/spec/containers/1/envFrom/1/secretRef/name", "db-abcdef0123"},
				{"replace", "/spec/containers/1/env/0/valueFrom/configMapKeyRef/name", "app-0123456789"}, {"replace", "/spec/containers/1/env/1/valueFrom/secretKeyRef/name", "db-abcdef0123"}}},
		{"init container", corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i", EnvFrom: envFrom[:1], Env: envs[1:]}}},
			[]Op{{"replace", "/spec/initContainers/0/envFrom/0/configMapRef/name", "app-0123456789"}, {"replace", "/spec/initContainers/0/env/0/valueFrom/secretKeyRef/name", "db-abcdef0123"}}},
		{"ephemeral container", corev1.PodSpec{EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "e", EnvFrom: envFrom[1:], Env: envs[:1]}}}},
			[]Op{{"replace", "/spec/ephemeralContainers/0/envFrom/0/secretRef/name", "db-abcdef0123"}, {"replace", "/spec/ephemeralContainers/0/env/0/valueFrom/configMapKeyRef/name", "app-0123456789"}}},
		{"a source without a snapshot is read live", corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "other"}}}}}},
			nil},
		{"a ConfigMap and a Secret of one name are two sources", corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "app"}}}}},
			nil},
		{"a plain env value, a field ref and an empty name are left alone", corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{
			{Name: "A", Value: "app"}, {Name: "B", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "C", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "k"}}},
		}}}},
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Rewrite("shop", &tc.spec, onShop))
		})
	}
}

// The patch applies to the pod as the API server sends it, and changes names only: items,
// keys, subPath, optional and modes keep their meaning.
func TestRewritePatchChangesNamesOnly(t *testing.T) {
	optional := true
	mode := int32(0o440)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop"},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"},
					Items: []corev1.KeyToPath{{Key: "app.conf", Path: "nginx.conf"}}, DefaultMode: &mode, Optional: &optional}}},
				{Name: "db", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db", Optional: &optional}}},
			},
			Containers: []corev1.Container{{Name: "c", Image: "app",
				VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/nginx/nginx.conf", SubPath: "nginx.conf"}},
				Env:          []corev1.EnvVar{{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password", Optional: &optional}}}},
			}},
		},
	}
	want := pod.DeepCopy()
	want.Spec.Volumes[0].ConfigMap.Name = "app-0123456789"
	want.Spec.Volumes[1].Secret.SecretName = "db-abcdef0123"
	want.Spec.Containers[0].Env[0].ValueFrom.SecretKeyRef.Name = "db-abcdef0123"

	ops := Rewrite("shop", &pod.Spec, onShop)
	require.Len(t, ops, 3)
	assert.Equal(t, want, applyOps(t, pod, ops))

	assert.Empty(t, Rewrite("web", &pod.Spec, onShop), "snapshots of another namespace are not this pod's")
}

func applyOps(t *testing.T, pod *corev1.Pod, ops []Op) *corev1.Pod {
	t.Helper()
	doc, err := json.Marshal(pod)
	require.NoError(t, err)
	p, err := json.Marshal(ops)
	require.NoError(t, err)
	patch, err := jsonpatch.DecodePatch(p)
	require.NoError(t, err)
	patched, err := patch.Apply(doc)
	require.NoError(t, err)
	out := &corev1.Pod{}
	require.NoError(t, json.Unmarshal(patched, out))
	return out
}
