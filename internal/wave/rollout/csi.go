package rollout

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/csi"
	"github.com/configwave/configwave/internal/wave/informer"
	"github.com/configwave/configwave/internal/wave/podrefs"
)

// WatchSecretProviderClasses follows the Secrets Store CSI driver (Reloader's
// --enable-csi-integration): its pods' statuses, for the versions they mounted, and the
// SecretProviderClasses, for Reloader's match and ignore annotations on them. Call it, when
// csi.Served says so, before Start.
func (inf *Informers) WatchSecretProviderClasses(client dynamic.Interface) error {
	inf.csi = csi.NewTracker()
	for ns := range inf.watched {
		indexers := informer.NamespaceIndex()
		maps.Copy(indexers, csi.Indexers())
		statuses := informer.New[*unstructured.UnstructuredList](client.Resource(csi.PodStatuses).Namespace(ns), client, &unstructured.Unstructured{},
			informer.Options{Indexers: indexers, Transform: csi.Transform})
		if err := inf.csi.Watch(statuses); err != nil {
			return err
		}
		// With the namespace index configNames reads.
		classes := informer.New[*unstructured.UnstructuredList](client.Resource(csi.Classes).Namespace(ns), client, &unstructured.Unstructured{},
			informer.Options{Indexers: informer.NamespaceIndex(), Transform: inf.digester.TransformMeta})
		inf.configs[configref.SecretProviderClass] = append(inf.configs[configref.SecretProviderClass], classes)
		inf.csiSynced = append(inf.csiSynced, statuses.HasSynced)
		inf.csiStatuses = append(inf.csiStatuses, statuses)
		inf.all = append(inf.all, statuses, classes)
	}
	return nil
}

// secretProviderClassHash is Reloader's hash of the versions a class's pods run, and whether
// any pod reports on it.
func (inf *Informers) secretProviderClassHash(ref configref.Ref) (string, bool) {
	if inf.csi == nil {
		return "", false
	}
	return inf.csi.Current(ref)
}

// secretProviderClassDigests: that hash as the record's one digest of the class.
func (inf *Informers) secretProviderClassDigests(ref configref.Ref) (map[string]string, bool) {
	h, ok := inf.secretProviderClassHash(ref)
	if !ok {
		return nil, false
	}
	return map[string]string{"versions": h}, true
}

// configKinds are the kinds of config wave follows: SecretProviderClasses too with
// --enable-csi-integration (and the driver's CRDs served).
func (inf *Informers) configKinds() []configref.Kind {
	if inf.csi != nil {
		return []configref.Kind{configref.ConfigMap, configref.Secret, configref.SecretProviderClass}
	}
	return []configref.Kind{configref.ConfigMap, configref.Secret}
}

// addSecretProviderClasses adds to used the SecretProviderClasses the pods mount, for a
// workload that Reloader's annotations select, as Reloader does only for them. A pod's status
// comes and goes with the pod, so a class is never required.
func (c *Controller) addSecretProviderClasses(used podrefs.References, namespace string, spec *corev1.PodSpec, sel selection) {
	if c.Informers.csi == nil || sel.stakater == nil {
		return
	}
	for name, where := range csi.ClassesOf(spec) {
		r := configref.Ref{Kind: configref.SecretProviderClass, Namespace: namespace, Name: name}
		if _, ok := used.Visible[r]; !ok {
			used.Visible[r] = &podrefs.Use{AllKeys: true, Where: where}
		}
	}
}
