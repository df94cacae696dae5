package workload

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Cached implements metav1.Object for the informer's key functions and store. Only who it is
// and its resourceVersion are kept outside the encoding: every other field reads as empty
// here (Of gives the whole metadata), and setting it does nothing.

func (c *Cached) GetNamespace() string                          { return c.Namespace }
func (c *Cached) SetNamespace(v string)                         { c.Namespace = v }
func (c *Cached) GetName() string                               { return c.Name }
func (c *Cached) SetName(v string)                              { c.Name = v }
func (c *Cached) GetGenerateName() string                       { return "" }
func (c *Cached) SetGenerateName(string)                        {}
func (c *Cached) GetUID() types.UID                             { return "" }
func (c *Cached) SetUID(types.UID)                              {}
func (c *Cached) GetResourceVersion() string                    { return c.ResourceVersion }
func (c *Cached) SetResourceVersion(v string)                   { c.ResourceVersion = v }
func (c *Cached) GetGeneration() int64                          { return 0 }
func (c *Cached) SetGeneration(int64)                           {}
func (c *Cached) GetSelfLink() string                           { return "" }
func (c *Cached) SetSelfLink(string)                            {}
func (c *Cached) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (c *Cached) SetCreationTimestamp(metav1.Time)              {}
func (c *Cached) GetDeletionTimestamp() *metav1.Time            { return nil }
func (c *Cached) SetDeletionTimestamp(*metav1.Time)             {}
func (c *Cached) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (c *Cached) SetDeletionGracePeriodSeconds(*int64)          {}
func (c *Cached) GetLabels() map[string]string                  { return nil }
func (c *Cached) SetLabels(map[string]string)                   {}
func (c *Cached) GetAnnotations() map[string]string             { return nil }
func (c *Cached) SetAnnotations(map[string]string)              {}
func (c *Cached) GetFinalizers() []string                       { return nil }
func (c *Cached) SetFinalizers([]string)                        {}
func (c *Cached) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (c *Cached) SetOwnerReferences([]metav1.OwnerReference)    {}
func (c *Cached) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (c *Cached) SetManagedFields([]metav1.ManagedFieldsEntry)  {}
