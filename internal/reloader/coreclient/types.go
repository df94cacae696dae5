package coreclient

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// The types below carry the fields of core/v1 that the reloader reads or writes, with the
// API's JSON names; anything else the API server sends is ignored when decoding. They stand in
// for k8s.io/api/core/v1, whose generated code for every core type is the largest part of a
// sidecar binary and of its resident pages.

// ConfigMap is a core/v1 ConfigMap: its metadata and data.
type ConfigMap struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Data              map[string]string `json:"data,omitempty"`
	BinaryData        map[string][]byte `json:"binaryData,omitempty"`
}

// ConfigMapList is a list of ConfigMaps.
type ConfigMapList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConfigMap `json:"items"`
}

// Secret is a core/v1 Secret: its metadata, type and data.
type Secret struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Data              map[string][]byte `json:"data,omitempty"`
	Type              string            `json:"type,omitempty"`
}

// SecretList is a list of Secrets.
type SecretList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Secret `json:"items"`
}

// Event is a core/v1 Event with the fields `kubectl describe` shows.
type Event struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	InvolvedObject    ObjectReference `json:"involvedObject"`
	Reason            string          `json:"reason,omitempty"`
	Message           string          `json:"message,omitempty"`
	Source            EventSource     `json:"source,omitempty"`
	FirstTimestamp    metav1.Time     `json:"firstTimestamp,omitempty"`
	LastTimestamp     metav1.Time     `json:"lastTimestamp,omitempty"`
	Count             int32           `json:"count,omitempty"`
	Type              string          `json:"type,omitempty"`
}

// ObjectReference names the object an Event is about.
type ObjectReference struct {
	Kind       string    `json:"kind,omitempty"`
	Namespace  string    `json:"namespace,omitempty"`
	Name       string    `json:"name,omitempty"`
	UID        types.UID `json:"uid,omitempty"`
	APIVersion string    `json:"apiVersion,omitempty"`
}

// EventSource names the component that posted an Event.
type EventSource struct {
	Component string `json:"component,omitempty"`
}

func (c *ConfigMap) DeepCopyObject() runtime.Object {
	out := *c
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Data = maps.Clone(c.Data)
	out.BinaryData = cloneBytes(c.BinaryData)
	return &out
}

func (l *ConfigMapList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]ConfigMap, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*ConfigMap)
	}
	return &out
}

func (s *Secret) DeepCopyObject() runtime.Object {
	out := *s
	s.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Data = cloneBytes(s.Data)
	return &out
}

func (l *SecretList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]Secret, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*Secret)
	}
	return &out
}

func (e *Event) DeepCopyObject() runtime.Object {
	out := *e
	e.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

func cloneBytes(m map[string][]byte) map[string][]byte {
	if m == nil {
		return nil
	}
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = append([]byte(nil), v...)
	}
	return out
}
