package workload

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// lastApplied is where `kubectl apply` keeps a copy of the whole object it applied.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Trim is the informer transform for workloads. It drops the parts of a cached
// workload that wave never reads and that make it large: managedFields (which manager set
// which field: 5.7 KB of a 10 KB Deployment as the benchmark creates it), kubectl's copy of
// the whole object in an annotation; then Compact keeps of a Deployment, StatefulSet
// or DaemonSet only what wave reads. wave writes workloads only with patches of its own
// fields, never by sending a cached object back, so what the cache lacks is never lost.
func Trim(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a != nil {
			if _, ok := a[lastApplied]; ok {
				trimmed := make(map[string]string, len(a)-1)
				for k, v := range a {
					if k != lastApplied {
						trimmed[k] = v
					}
				}
				m.SetAnnotations(trimmed)
			}
		}
	}
	return Compact(obj), nil
}
