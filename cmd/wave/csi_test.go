package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configwave/configwave/internal/testenv/testcluster"
	"github.com/configwave/configwave/internal/wave/csi"
	"github.com/configwave/configwave/internal/wave/podrefs"
)

func withSecretProviderClass(class string) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Volumes = append(s.Volumes, corev1.Volume{Name: "secrets-" + class, VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
			Driver: csi.Driver, ReadOnly: ptr(true), VolumeAttributes: map[string]string{csi.ClassAttribute: class}}}})
		s.Containers[0].VolumeMounts = append(s.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "secrets-" + class, MountPath: "/mnt/" + class, ReadOnly: true})
	}
}

// mountStatuses writes, for every running pod of a Deployment's current ReplicaSet that has
// none yet, the SecretProviderClassPodStatus the driver writes when it mounts class: named
// POD-NAMESPACE-CLASS, labelled with the node, owned by the pod, listing the objects' versions.
func mountStatuses(t *testing.T, client kubernetes.Interface, statuses dynamic.NamespaceableResourceInterface, ns, deployment, class string, versions map[string]string) []string {
	t.Helper()
	pods, err := client.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: "app=" + deployment})
	require.NoError(t, err)
	var names []string
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp != nil {
			continue
		}
		name := pod.Name + "-" + ns + "-" + class
		if _, err := statuses.Namespace(ns).Get(ctx(t), name, metav1.GetOptions{}); err == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClassPodStatus",
			"metadata": map[string]any{"name": name, "namespace": ns,
				"labels":          map[string]any{"internal.secrets-store.csi.k8s.io/node-name": pod.Spec.NodeName},
				"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "Pod", "name": pod.Name, "uid": string(pod.UID)}}},
			"status": map[string]any{"podName": pod.Name, "secretProviderClassName": class, "mounted": true,
				"targetPath": "/var/lib/kubelet/pods/" + string(pod.UID) + "/volumes/kubernetes.io~csi/secrets-" + class + "/mount",
				"objects":    objectsOf(versions)},
		}}
		_, err := statuses.Namespace(ns).Create(ctx(t), u, metav1.CreateOptions{})
		require.NoError(t, err)
		names = append(names, name)
	}
	return names
}

func objectsOf(versions map[string]string) []any {
	var out []any
	for id, v := range versions {
		out = append(out, map[string]any{"id": id, "version": v})
	}
	return out
}

// rotate updates one status's versions, as the driver's rotation reconciler does, unless the
// status went with its pod.
func rotate(t *testing.T, statuses dynamic.NamespaceableResourceInterface, ns, name string, versions map[string]string) {
	t.Helper()
	u, err := statuses.Namespace(ns).Get(ctx(t), name, metav1.GetOptions{})
	if err == nil {
		require.NoError(t, unstructured.SetNestedSlice(u.Object, objectsOf(versions), "status", "objects"))
		_, err = statuses.Namespace(ns).Update(ctx(t), u, metav1.UpdateOptions{})
	}
	require.NoError(t, ignoreNotFound(err), "a status goes with its pod, and only then")
}

// TestSecretProviderClasses: manifests written for Stakater Reloader with
// --enable-csi-integration, against the driver's real CRDs. A rotation of the objects behind
// a SecretProviderClass, seen in one pod's status, rolls each workload that follows the class
// once; the other pods catching up, new pods mounting, old pods' statuses going with their pods
// roll nothing more. Reloader's marks carry over: a current one rolls nothing at the switch, an
// older one rolls once.
func TestSecretProviderClasses(t *testing.T) {
	client := adminClient(t)
	testcluster.InstallSecretsStoreCRDs(t, cluster)
	ns := testcluster.Namespace(t, client)
	dyn, err := dynamic.NewForConfig(cluster.Config())
	require.NoError(t, err)
	statuses := dyn.Resource(csi.PodStatuses)
	for _, class := range []string{"vault", "other"} {
		_, err := dyn.Resource(csi.Classes).Namespace(ns).Create(ctx(t), &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClass",
			"metadata": map[string]any{"name": class, "namespace": ns},
			"spec":     map[string]any{"provider": "vault", "parameters": map[string]any{"objects": "- objectName: db"}},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	v1 := map[string]string{"secret/db": "1", "secret/tls": "4"}
	v2 := map[string]string{"secret/db": "2", "secret/tls": "4"}
	mark := func(objects map[string]string) func(*corev1.PodSpec) {
		var list []csi.Object
		for id, v := range objects {
			list = append(list, csi.Object{ID: id, Version: v})
		}
		return func(s *corev1.PodSpec) {
			s.Containers[0].Env = append(s.Containers[0].Env, corev1.EnvVar{Name: "STAKATER_VAULT_SECRETPROVIDERCLASS", Value: csi.Hash("vault", list)})
		}
	}
	auto := map[string]string{podrefs.StakaterAuto: "true"}
	deployments := map[string]*appsv1.Deployment{
		"auto":         stakaterDeployment(ns, "auto", auto, withSecretProviderClass("vault")),
		"class-auto":   stakaterDeployment(ns, "class-auto", map[string]string{podrefs.StakaterSecretProviderClassAuto: "true"}, withSecretProviderClass("vault")),
		"named":        stakaterDeployment(ns, "named", map[string]string{podrefs.StakaterSecretProviderClassReload: "vault"}),
		"other-class":  stakaterDeployment(ns, "other-class", auto, withSecretProviderClass("other")),
		"excluded":     stakaterDeployment(ns, "excluded", map[string]string{podrefs.StakaterAuto: "true", podrefs.StakaterSecretProviderClassesExclude: "vault"}, withSecretProviderClass("vault")),
		"wave":         optIn(stakaterDeployment(ns, "wave", nil, withSecretProviderClass("vault"))),
		"mark-current": stakaterDeployment(ns, "mark-current", auto, withSecretProviderClass("vault"), mark(v1)),
		"mark-behind":  stakaterDeployment(ns, "mark-behind", auto, withSecretProviderClass("vault"), mark(map[string]string{"secret/db": "0", "secret/tls": "4"})),
	}
	for _, d := range deployments {
		createDeployment(t, client, d)
	}
	for name := range deployments {
		require.NoError(t, testcluster.WaitDeploymentComplete(ctx(t), client, ns, name, eventually))
	}
	vaultStatuses := mountStatuses(t, client, statuses, ns, "auto", "vault", v1) // the one that rotates first
	for name := range deployments {
		if name != "auto" && name != "named" && name != "other-class" {
			vaultStatuses = append(vaultStatuses, mountStatuses(t, client, statuses, ns, name, "vault", v1)...)
		}
	}
	mountStatuses(t, client, statuses, ns, "other-class", "other", v1)

	p := startWave(t, ns, "--enable-csi-integration=true")
	assert.Contains(t, p.Log(), "following SecretProviderClasses")
	for name := range deployments {
		waitRecorded(t, client, ns, name)
	}
	settle(t, p)
	count := func() map[string]int {
		out := map[string]int{}
		for name := range deployments {
			out[name] = len(replicaSets(t, client, ns, name))
		}
		return out
	}
	assert.Equal(t, map[string]int{"auto": 1, "class-auto": 1, "named": 1, "other-class": 1, "excluded": 1, "wave": 1, "mark-current": 1, "mark-behind": 2}, count(),
		"the switch rolls only the workload whose Reloader mark is older")
	assert.Contains(t, getDeployment(t, client, ns, "auto").Annotations["configwave.io/config-inputs"], "secretproviderclass/vault=")

	// The provider rotated db; the driver updates one pod's status first.
	rotate(t, statuses, ns, vaultStatuses[0], v2)
	before := inputsHash(getDeployment(t, client, ns, "auto"))
	waitTemplateHashChange(t, client, ns, "auto", before)
	settle(t, p)
	want := map[string]int{"auto": 2, "class-auto": 2, "named": 2, "other-class": 1, "excluded": 1, "wave": 1, "mark-current": 2, "mark-behind": 3}
	assert.Equal(t, want, count(), "each workload that follows the class rolls once")
	changed := events(t, client, ns, "auto", "ConfigChanged")
	require.NotEmpty(t, changed)
	assert.Contains(t, changed[len(changed)-1].Message, "secretproviderclass/vault changed")

	// The other pods catch up; the new pods mount the new versions; the old pods' statuses go
	// with their pods (garbage collection through the owner reference).
	for _, name := range vaultStatuses[1:] {
		rotate(t, statuses, ns, name, v2)
	}
	for name := range deployments {
		if name != "named" && name != "other-class" {
			mountStatuses(t, client, statuses, ns, name, "vault", v2)
		}
	}
	settle(t, p)
	assert.Equal(t, want, count(), "nothing rolls twice for one rotation")
	assert.False(t, strings.Contains(p.Log(), "panic"))

	// With the CRDs served but no right to read them, wave stops at once, saying what to grant,
	// instead of never becoming ready.
	kubeconfig := roleKubeconfig(t, client, ns, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "no-csi"}})
	var stopped *testcluster.Process
	require.Eventually(t, func() bool { // the ServiceAccount's token reaches the authenticator in a moment
		q, ready := tryStartWave(t, ns, "--kubeconfig="+kubeconfig, "--install-key-secret=", "--enable-csi-integration")
		require.False(t, ready)
		q.Wait(t, 5*time.Second)
		stopped = q
		return strings.Contains(q.Log(), "--enable-csi-integration reads the Secrets Store CSI driver's objects, and wave may not list")
	}, eventually, 500*time.Millisecond)
	assert.Contains(t, stopped.Log(), "grant get, list and watch on secretproviderclasspodstatuses and secretproviderclasses")
}
