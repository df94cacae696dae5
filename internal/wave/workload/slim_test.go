package workload

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/csi"
	"github.com/configwave/configwave/internal/wave/podrefs"
)

// richTemplate uses config every way a pod can, beside fields wave never reads.
func richTemplate() corev1.PodTemplateSpec {
	yes := true
	cmKey := func(name, key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{podrefs.ConfigHashAnnotation: "abc", podrefs.StakaterLastReloadedFrom: `{"type":"CONFIGMAP","name":"env"}`}},
		Spec: corev1.PodSpec{
			SchedulerName: "wave-disabled",
			Volumes: []corev1.Volume{
				{Name: "files", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "files"}, Items: []corev1.KeyToPath{{Key: "a", Path: "a"}}}}},
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls", Optional: &yes}}},
				{Name: "unmounted", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "only-wave"}}}},
				{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj"}, Items: []corev1.KeyToPath{{Key: "k", Path: "k"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{}},
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-secret"}}},
				}}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "vault", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: csi.Driver, VolumeAttributes: map[string]string{csi.ClassAttribute: "vault", "other": "x"}}}},
				{Name: "nfs", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "nfs.csi.k8s.io", VolumeAttributes: map[string]string{"server": "x"}}}},
			},
			InitContainers: []corev1.Container{{Name: "init", Image: "init:1", Env: []corev1.EnvVar{{Name: "I", ValueFrom: cmKey("init-cm", "i")}}}},
			Containers: []corev1.Container{{
				Name: "app", Image: "app:1", Command: []string{"serve"},
				Env: []corev1.EnvVar{
					{Name: "PLAIN", Value: "1"},
					{Name: "A", ValueFrom: cmKey("env", "a")},
					{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "pw", Optional: &yes}}},
					{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: podrefs.StakaterEnvName(configref.ConfigMap, "env"), Value: "0123"},
				},
				EnvFrom: []corev1.EnvFromSource{
					{Prefix: "X_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "bulk"}}},
					{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "bulk-secret"}}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "files", MountPath: "/f"}, {Name: "tls", MountPath: "/t"}, {Name: "all", MountPath: "/p"}, {Name: "scratch", MountPath: "/s"}, {Name: "vault", MountPath: "/v"}, {Name: "nfs", MountPath: "/n"}},
			}},
		},
	}
}

// What the cache keeps gives wave everything it reads: the same references in both views, the
// same progress, the Stakater marks, the scheduler name, the metadata, the selector, and an
// object of the kind to refer Events to.
func TestCompactKeepsWhatWaveReads(t *testing.T) {
	replicas, partition := int32(3), int32(1)
	deadline := metav1.NewTime(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: 4, ResourceVersion: "9", UID: "u",
		Annotations: map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true", podrefs.ExtraConfigMapsAnnotation: "extra"}}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	objs := map[string]runtime.Object{
		"deployment": &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: selector, Template: richTemplate(), ProgressDeadlineSeconds: &replicas},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 4, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 2, Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "stuck", LastUpdateTime: deadline},
			}}},
		"statefulset": &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: &replicas, Selector: selector, Template: richTemplate(),
			UpdateStrategy:       appsv1.StatefulSetUpdateStrategy{RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &partition}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 4, ReadyReplicas: 3, UpdatedReplicas: 2, CurrentRevision: "a", UpdateRevision: "b"}},
		"daemonset": &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: selector, Template: richTemplate()},
			Status: appsv1.DaemonSetStatus{ObservedGeneration: 4, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 1}},
	}
	for name, obj := range objs {
		t.Run(name, func(t *testing.T) {
			before, ok := Of(obj.DeepCopyObject())
			require.True(t, ok)
			cached := Compact(obj)
			require.IsType(t, &Cached{}, cached)
			itself, _ := Of(obj)
			assert.Equal(t, before.Progress, itself.Progress, "the object itself keeps its status: it is what the cache keeps if encoding fails")
			after, ok := Of(cached)
			require.True(t, ok)
			key, ok := KeyOf(cached)
			require.True(t, ok)
			assert.Equal(t, before.Key(), key)
			assert.Equal(t, before.Kind, after.Kind)
			assert.IsType(t, obj, after.Object)
			assert.Equal(t, before.Meta, after.Object.(metav1.ObjectMetaAccessor).GetObjectMeta())
			assert.Equal(t, podrefs.Extract("ns", before.Meta.Annotations, &before.Template.Spec), podrefs.Extract("ns", after.Meta.Annotations, &after.Template.Spec))
			assert.Equal(t, before.Progress, after.Progress)
			assert.Equal(t, before.Meta, after.Meta)
			assert.Equal(t, before.Selector, after.Selector)
			assert.Equal(t, before.Template.Annotations, after.Template.Annotations)
			assert.Equal(t, "wave-disabled", after.Template.Spec.SchedulerName)
			app := after.Template.Spec.Containers[0]
			assert.Contains(t, app.Env, corev1.EnvVar{Name: podrefs.StakaterEnvName(configref.ConfigMap, "env"), Value: "0123"}, "Reloader's mark")
			assert.Empty(t, app.Image, "what wave never reads is gone")
			assert.Len(t, app.Env, 3, "plain and field env entries are gone")
			assert.Len(t, after.Template.Spec.Volumes, 5, "the emptyDir and the other CSI driver's volume are gone")
			assert.Equal(t, csi.ClassesOf(&before.Template.Spec), csi.ClassesOf(&after.Template.Spec), "the Secrets Store volume stays, with its class")
			assert.Equal(t, map[string]string{"vault": `volume "vault"`}, csi.ClassesOf(&after.Template.Spec))
		})
	}
}

// A Cached object is of one kind only, it is keyed and versioned like the object it stands
// for, its copies are its own, and an encoding that does not decode leaves the workload alone
// rather than failing the process.
func TestCachedOfItsKindOnly(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "7", Annotations: map[string]string{"a": "1"}},
		Spec: appsv1.DeploymentSpec{Template: richTemplate()}}
	c := Compact(d).(*Cached)
	_, ok := statefulSets.Of(c)
	assert.False(t, ok, "a Deployment is no StatefulSet")

	key, err := cache.MetaNamespaceKeyFunc(c)
	require.NoError(t, err)
	assert.Equal(t, "ns/web", key)
	assert.Equal(t, "7", c.GetResourceVersion())
	w, ok := Of(c)
	require.True(t, ok)
	assert.Equal(t, map[string]string{"a": "1"}, w.Meta.Annotations)

	cp := c.DeepCopyObject().(*Cached)
	cp.ResourceVersion = "8"
	assert.Equal(t, "7", c.ResourceVersion)

	c.encoded = []byte{0xff, 0xff}
	_, ok = Of(c)
	assert.False(t, ok)
	qkey, ok := KeyOf(c)
	assert.True(t, ok, "the key needs no decoding")
	assert.Equal(t, "Deployment/ns/web", qkey)
}

// A CronJob's template becomes a Job's whole: the cache keeps it as it is.
func TestCompactKeepsACronJobWhole(t *testing.T) {
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly"}}
	cj.Spec.JobTemplate.Spec.Template = richTemplate()
	want := cj.DeepCopy()
	assert.Same(t, cj, Compact(cj))
	assert.Equal(t, want, cj)
}

// Pack swaps every cached workload for an equal copy, whatever else the store holds staying
// as it is, and the copies read back as the originals did.
func TestPackCopiesCachedWorkloads(t *testing.T) {
	cronJob := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly"}}
	var objs, before []any
	for i, kind := range []string{"deployment", "statefulset", "daemonset"} {
		meta := metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("app-", i), ResourceVersion: fmt.Sprint(10 + i), Annotations: map[string]string{"k": kind}}
		var obj runtime.Object
		switch kind {
		case "deployment":
			obj = &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Template: richTemplate()}}
		case "statefulset":
			obj = &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Template: richTemplate()}}
		default:
			obj = &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Template: richTemplate()},
				Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, NumberAvailable: 1}}
		}
		objs = append(objs, Compact(obj))
		before = append(before, Compact(obj))
	}
	objs = append(objs, cronJob)
	Pack(objs)
	assert.Same(t, cronJob, objs[3], "a kind kept whole stays as it is")
	for i := range 3 {
		require.IsType(t, &Cached{}, objs[i])
		assert.NotSame(t, before[i], objs[i])
		assert.Equal(t, before[i], objs[i])
		want, ok := Of(before[i])
		require.True(t, ok)
		got, ok := Of(objs[i])
		require.True(t, ok)
		assert.Equal(t, want, got)
	}
	// Each copy's encoding is its own part of the shared array: growing one leaves the next.
	first, second := objs[0].(*Cached), objs[1].(*Cached)
	next := slices.Clone(second.encoded)
	grown := append(first.encoded, 0xff)
	assert.Len(t, grown, len(first.encoded)+1)
	assert.Equal(t, next, second.encoded)
}
