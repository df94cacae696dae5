package slimcache

// What wave's own informer cache types have in common: they keep who an object is and its
// resourceVersion outside whatever else they reduce it to.

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Identity implements metav1.Object for a type that embeds it, so that an informer's key
// functions, its store and its indexers work on that type unchanged. Only the namespace, the
// name and the resourceVersion are kept: every other field reads as empty, and setting it does
// nothing, unless the embedding type keeps it and says so with methods of its own.
type Identity struct {
	Namespace, Name string
	ResourceVersion string
}

func (i *Identity) GetNamespace() string                          { return i.Namespace }
func (i *Identity) SetNamespace(v string)                         { i.Namespace = v }
func (i *Identity) GetName() string                               { return i.Name }
func (i *Identity) SetName(v string)                              { i.Name = v }
func (i *Identity) GetResourceVersion() string                    { return i.ResourceVersion }
func (i *Identity) SetResourceVersion(v string)                   { i.ResourceVersion = v }
func (i *Identity) GetGenerateName() string                       { return "" }
func (i *Identity) SetGenerateName(string)                        {}
func (i *Identity) GetUID() types.UID                             { return "" }
func (i *Identity) SetUID(types.UID)                              {}
func (i *Identity) GetGeneration() int64                          { return 0 }
func (i *Identity) SetGeneration(int64)                           {}
func (i *Identity) GetSelfLink() string                           { return "" }
func (i *Identity) SetSelfLink(string)                            {}
func (i *Identity) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (i *Identity) SetCreationTimestamp(metav1.Time)              {}
func (i *Identity) GetDeletionTimestamp() *metav1.Time            { return nil }
func (i *Identity) SetDeletionTimestamp(*metav1.Time)             {}
func (i *Identity) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (i *Identity) SetDeletionGracePeriodSeconds(*int64)          {}
func (i *Identity) GetLabels() map[string]string                  { return nil }
func (i *Identity) SetLabels(map[string]string)                   {}
func (i *Identity) GetAnnotations() map[string]string             { return nil }
func (i *Identity) SetAnnotations(map[string]string)              {}
func (i *Identity) GetFinalizers() []string                       { return nil }
func (i *Identity) SetFinalizers([]string)                        {}
func (i *Identity) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (i *Identity) SetOwnerReferences([]metav1.OwnerReference)    {}
func (i *Identity) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (i *Identity) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

var _ metav1.Object = &Identity{}
