package coreclient

// Protobuf decoding of the objects the reloader reads. Every change the reloader waits for
// comes as a watch event, and decoding it is on the path from a ConfigMap's change to the
// app's reload: the API server's JSON took 18 µs a ConfigMap to decode here, its protobuf 2 µs,
// and a sidecar woken from its sleep pays several times that in cold caches.
//
// The generated code of k8s.io/api/core/v1 would do this for the whole of core/v1 (see the
// package comment), so the few fields the reloader keeps are read here by their numbers in
// k8s.io/api/core/v1/generated.proto; metav1's own generated code reads the metadata. Fields
// not known here are skipped, as protobuf intends.

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Field numbers of core/v1's generated.proto.
const (
	fieldMetadata        = 1 // ObjectMeta of an object, ListMeta of a list
	fieldItems           = 2 // of a list
	fieldConfigMapData   = 2
	fieldConfigMapBinary = 3
	fieldSecretData      = 2
	fieldSecretType      = 3
)

// Reset implements the protobuf decoder's interface.
func (c *ConfigMap) Reset() { *c = ConfigMap{} }

// Unmarshal decodes a protobuf core/v1 ConfigMap.
func (c *ConfigMap) Unmarshal(b []byte) error {
	return eachField(b, "ConfigMap", func(num protowire.Number, v []byte) error {
		switch num {
		case fieldMetadata:
			return c.ObjectMeta.Unmarshal(v)
		case fieldConfigMapData:
			return putEntry(&c.Data, v)
		case fieldConfigMapBinary:
			return putEntry(&c.BinaryData, v)
		}
		return nil
	})
}

// Reset implements the protobuf decoder's interface.
func (s *Secret) Reset() { *s = Secret{} }

// Unmarshal decodes a protobuf core/v1 Secret.
func (s *Secret) Unmarshal(b []byte) error {
	return eachField(b, "Secret", func(num protowire.Number, v []byte) error {
		switch num {
		case fieldMetadata:
			return s.ObjectMeta.Unmarshal(v)
		case fieldSecretData:
			return putEntry(&s.Data, v)
		case fieldSecretType:
			s.Type = string(v)
		}
		return nil
	})
}

// Reset implements the protobuf decoder's interface.
func (l *ConfigMapList) Reset() { *l = ConfigMapList{} }

// Unmarshal decodes a protobuf core/v1 ConfigMapList.
func (l *ConfigMapList) Unmarshal(b []byte) error {
	return unmarshalList(b, "ConfigMapList", &l.ListMeta, &l.Items)
}

// Reset implements the protobuf decoder's interface.
func (l *SecretList) Reset() { *l = SecretList{} }

// Unmarshal decodes a protobuf core/v1 SecretList.
func (l *SecretList) Unmarshal(b []byte) error {
	return unmarshalList(b, "SecretList", &l.ListMeta, &l.Items)
}

// unmarshalList decodes a core/v1 list: its metadata into meta, each item appended to items.
func unmarshalList[T any, P interface {
	*T
	Unmarshal([]byte) error
}](b []byte, what string, meta *metav1.ListMeta, items *[]T) error {
	return eachField(b, what, func(num protowire.Number, v []byte) error {
		switch num {
		case fieldMetadata:
			return meta.Unmarshal(v)
		case fieldItems:
			*items = append(*items, *new(T))
			return P(&(*items)[len(*items)-1]).Unmarshal(v)
		}
		return nil
	})
}

var errTruncated = errors.New("truncated or malformed protobuf")

// eachField calls f with the number and bytes of every length-delimited field of the message
// b, and skips fields of other wire types: every field read here is length-delimited, and one
// that is not is not the field it is numbered as (a newer API), so it is skipped like one
// unknown.
func eachField(b []byte, what string, f func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("decode %s: %w", what, errTruncated)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return fmt.Errorf("decode %s: field %d: %w", what, num, errTruncated)
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("decode %s: field %d: %w", what, num, errTruncated)
		}
		b = b[n:]
		if err := f(num, v); err != nil {
			return fmt.Errorf("decode %s: field %d: %w", what, num, err)
		}
	}
	return nil
}

// putEntry decodes one entry of a protobuf map into *m, making the map at its first entry. The
// value is copied: the decoder reuses its buffer.
func putEntry[V string | []byte](m *map[string]V, b []byte) error {
	k, v, err := mapEntry(b)
	if err != nil {
		return err
	}
	if *m == nil {
		*m = map[string]V{}
	}
	(*m)[k] = V(append([]byte{}, v...))
	return nil
}

// mapEntry decodes one entry of a protobuf map<string, string|bytes>: key 1, value 2, either
// absent meaning empty.
func mapEntry(b []byte) (key string, value []byte, err error) {
	err = eachField(b, "map entry", func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			key = string(v)
		case 2:
			value = v
		}
		return nil
	})
	return key, value, err
}

// protoMessage is what apimachinery's protobuf decoder needs of an object it is given.
type protoMessage interface {
	Reset()
	Unmarshal([]byte) error
}

var (
	_ protoMessage = (*ConfigMap)(nil)
	_ protoMessage = (*Secret)(nil)
	_ protoMessage = (*ConfigMapList)(nil)
	_ protoMessage = (*SecretList)(nil)
)
