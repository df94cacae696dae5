package workload

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/configwave/configwave/internal/wave/csi"
	"github.com/configwave/configwave/internal/wave/podrefs"
)

// slimTemplate keeps of a pod template what wave reads of it (Cached): its annotations, its
// scheduler name, every reference to a ConfigMap or Secret (podrefs.Extract, Stakater Reloader's
// marks) and the volumes of the Secrets Store CSI driver, with the class they name.
func slimTemplate(t *corev1.PodTemplateSpec) {
	s := &t.Spec
	volumes := make([]corev1.Volume, 0, len(s.Volumes))
	kept := map[string]bool{}
	for _, v := range s.Volumes {
		src := corev1.VolumeSource{ConfigMap: v.ConfigMap, Secret: v.Secret}
		if c := v.CSI; c != nil && c.Driver == csi.Driver {
			src.CSI = &corev1.CSIVolumeSource{Driver: c.Driver, VolumeAttributes: map[string]string{csi.ClassAttribute: c.VolumeAttributes[csi.ClassAttribute]}}
		}
		if p := v.Projected; p != nil {
			var sources []corev1.VolumeProjection
			for _, ps := range p.Sources {
				if ps.ConfigMap != nil || ps.Secret != nil {
					sources = append(sources, corev1.VolumeProjection{ConfigMap: ps.ConfigMap, Secret: ps.Secret})
				}
			}
			if sources != nil {
				src.Projected = &corev1.ProjectedVolumeSource{Sources: sources}
			}
		}
		if src != (corev1.VolumeSource{}) {
			volumes = append(volumes, corev1.Volume{Name: v.Name, VolumeSource: src})
			kept[v.Name] = true
		}
	}
	*s = corev1.PodSpec{
		Volumes:        nilIfEmpty(volumes),
		InitContainers: slimContainers(s.InitContainers, kept),
		Containers:     slimContainers(s.Containers, kept),
		SchedulerName:  s.SchedulerName,
	}
	t.Labels = nil // the pods' labels: wave selects pods by the workload's selector
}

// slimContainers keeps each container's name (for Events), its env entries that read a
// ConfigMap or Secret or are Reloader's marks, its envFrom, and the names of its mounts of
// config volumes.
func slimContainers(cs []corev1.Container, configVolumes map[string]bool) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i].Name = c.Name
		for _, e := range c.Env {
			fromConfig := e.ValueFrom != nil && (e.ValueFrom.ConfigMapKeyRef != nil || e.ValueFrom.SecretKeyRef != nil)
			mark := e.ValueFrom == nil && strings.HasPrefix(e.Name, podrefs.StakaterEnvPrefix)
			if fromConfig {
				out[i].Env = append(out[i].Env, corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: e.ValueFrom.ConfigMapKeyRef, SecretKeyRef: e.ValueFrom.SecretKeyRef}})
			} else if mark {
				out[i].Env = append(out[i].Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
			}
		}
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil || e.SecretRef != nil {
				out[i].EnvFrom = append(out[i].EnvFrom, e)
			}
		}
		for _, m := range c.VolumeMounts {
			if configVolumes[m.Name] {
				out[i].VolumeMounts = append(out[i].VolumeMounts, corev1.VolumeMount{Name: m.Name})
			}
		}
	}
	return out
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}
