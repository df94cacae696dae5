package revisions

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/configwave/configwave/internal/kube/configref"
)

// Snapshots maps each source a revision uses, in the pod's namespace, to the snapshot its pods
// read instead. A source not in it (opted out, or with no snapshot) is read live.
type Snapshots map[configref.Ref]string

// Op is one operation of a JSON patch (RFC 6902), as an admission webhook answers.
type Op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value string `json:"value"`
}

// Rewrite returns the patch that makes a pod of namespace read its revision's snapshots
// wherever its spec names a source: volumes (configMap, secret and projected sources), and
// envFrom and env valueFrom in containers, init containers and ephemeral containers. It changes
// names only, so that items, keys, subPath, optional and modes keep their meaning: a snapshot
// holds every key of its source. Names that the spec leaves empty are left alone.
func Rewrite(namespace string, spec *corev1.PodSpec, snapshots Snapshots) []Op {
	return rewrite(spec, func(kind configref.Kind, name string) (string, bool) {
		snap, ok := snapshots[configref.Ref{Kind: kind, Namespace: namespace, Name: name}]
		return snap, ok
	})
}

// rewrite visits every place a pod spec names a ConfigMap or Secret, and replaces the name
// where snapshot gives one.
func rewrite(spec *corev1.PodSpec, snapshot func(kind configref.Kind, name string) (string, bool)) []Op {
	var ops []Op
	swap := func(kind configref.Kind, name, path string) {
		if name == "" {
			return
		}
		if snap, ok := snapshot(kind, name); ok && snap != name {
			ops = append(ops, Op{Op: "replace", Path: path, Value: snap})
		}
	}
	for i, v := range spec.Volumes {
		at := fmt.Sprintf("/spec/volumes/%d", i)
		if v.ConfigMap != nil {
			swap(configref.ConfigMap, v.ConfigMap.Name, at+"/configMap/name")
		}
		if v.Secret != nil {
			swap(configref.Secret, v.Secret.SecretName, at+"/secret/secretName")
		}
		if v.Projected != nil {
			for j, s := range v.Projected.Sources {
				src := fmt.Sprintf("%s/projected/sources/%d", at, j)
				if s.ConfigMap != nil {
					swap(configref.ConfigMap, s.ConfigMap.Name, src+"/configMap/name")
				}
				if s.Secret != nil {
					swap(configref.Secret, s.Secret.Name, src+"/secret/name")
				}
			}
		}
	}
	containers := func(field string, n int, envFrom func(int) []corev1.EnvFromSource, env func(int) []corev1.EnvVar) {
		for i := range n {
			at := fmt.Sprintf("/spec/%s/%d", field, i)
			for j, e := range envFrom(i) {
				if e.ConfigMapRef != nil {
					swap(configref.ConfigMap, e.ConfigMapRef.Name, fmt.Sprintf("%s/envFrom/%d/configMapRef/name", at, j))
				}
				if e.SecretRef != nil {
					swap(configref.Secret, e.SecretRef.Name, fmt.Sprintf("%s/envFrom/%d/secretRef/name", at, j))
				}
			}
			for j, e := range env(i) {
				if e.ValueFrom == nil {
					continue
				}
				if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
					swap(configref.ConfigMap, r.Name, fmt.Sprintf("%s/env/%d/valueFrom/configMapKeyRef/name", at, j))
				}
				if r := e.ValueFrom.SecretKeyRef; r != nil {
					swap(configref.Secret, r.Name, fmt.Sprintf("%s/env/%d/valueFrom/secretKeyRef/name", at, j))
				}
			}
		}
	}
	containers("initContainers", len(spec.InitContainers),
		func(i int) []corev1.EnvFromSource { return spec.InitContainers[i].EnvFrom },
		func(i int) []corev1.EnvVar { return spec.InitContainers[i].Env })
	containers("containers", len(spec.Containers),
		func(i int) []corev1.EnvFromSource { return spec.Containers[i].EnvFrom },
		func(i int) []corev1.EnvVar { return spec.Containers[i].Env })
	containers("ephemeralContainers", len(spec.EphemeralContainers),
		func(i int) []corev1.EnvFromSource { return spec.EphemeralContainers[i].EnvFrom },
		func(i int) []corev1.EnvVar { return spec.EphemeralContainers[i].Env })
	return ops
}
