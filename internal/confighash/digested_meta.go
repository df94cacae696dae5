package confighash

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Digested implements metav1.Object so that the informer's key functions, its indexers and
// every caller that reads metadata through that interface work on it unchanged. The fields it
// does not keep read as empty, and setting them does nothing.

func (d *Digested) GetNamespace() string                          { return d.Namespace }
func (d *Digested) SetNamespace(v string)                         { d.Namespace = v }
func (d *Digested) GetName() string                               { return d.Name }
func (d *Digested) SetName(v string)                              { d.Name = v }
func (d *Digested) GetGenerateName() string                       { return "" }
func (d *Digested) SetGenerateName(string)                        {}
func (d *Digested) GetUID() types.UID                             { return "" }
func (d *Digested) SetUID(types.UID)                              {}
func (d *Digested) GetResourceVersion() string                    { return d.ResourceVersion }
func (d *Digested) SetResourceVersion(v string)                   { d.ResourceVersion = v }
func (d *Digested) GetGeneration() int64                          { return 0 }
func (d *Digested) SetGeneration(int64)                           {}
func (d *Digested) GetSelfLink() string                           { return "" }
func (d *Digested) SetSelfLink(string)                            {}
func (d *Digested) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (d *Digested) SetCreationTimestamp(metav1.Time)              {}
func (d *Digested) GetDeletionTimestamp() *metav1.Time            { return nil }
func (d *Digested) SetDeletionTimestamp(*metav1.Time)             {}
func (d *Digested) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (d *Digested) SetDeletionGracePeriodSeconds(*int64)          {}
func (d *Digested) GetFinalizers() []string                       { return nil }
func (d *Digested) SetFinalizers([]string)                        {}
func (d *Digested) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (d *Digested) SetOwnerReferences([]metav1.OwnerReference)    {}
func (d *Digested) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (d *Digested) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

func (d *Digested) GetLabels() map[string]string {
	if d.meta == nil {
		return nil
	}
	return d.meta.labels
}

func (d *Digested) SetLabels(v map[string]string) {
	if d.meta == nil {
		d.meta = &digestedMeta{}
	}
	d.meta.labels = v
}

func (d *Digested) GetAnnotations() map[string]string {
	if d.meta == nil {
		return nil
	}
	return d.meta.annotations
}

func (d *Digested) SetAnnotations(v map[string]string) {
	if d.meta == nil {
		d.meta = &digestedMeta{}
	}
	d.meta.annotations = v
}
