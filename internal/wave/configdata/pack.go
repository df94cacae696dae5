package configdata

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Why pack. The data wave keeps whole arrives among the data of every other ConfigMap and
// Secret the informers decode and drop. Kept as decoded, each value sits in a span of the Go
// heap between values that became garbage, and holds the whole span: with 100,000 objects of
// 1 KiB and 10,000 of them kept, 8 MB of kept data held about 38 MB of heap. A packed copy
// is one allocation per object; copied again once the initial lists are in (repack), when
// little else allocates, the copies lie together and the spans of the decoded ones are freed.

// packObject is the copy of a ConfigMap or Secret that wholeObjects keeps: the data and
// resourceVersion, each map's keys and values in one allocation; nil for any other type.
func packObject(o metav1.Object) metav1.Object {
	meta := metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: o.GetName(), ResourceVersion: o.GetResourceVersion()}
	switch v := o.(type) {
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{ObjectMeta: meta, Data: packStrings(v.Data), BinaryData: packBytes(v.BinaryData)}
	case *corev1.Secret:
		return &corev1.Secret{ObjectMeta: meta, Data: packBytes(v.Data), Type: secretType(v.Type)}
	}
	return nil
}

// packStrings copies m with every key and value a substring of one string.
func packStrings(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	keys, keyBytes, valueBytes := keysOf(m)
	var b strings.Builder
	b.Grow(keyBytes + valueBytes)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteString(m[k])
	}
	all := b.String()
	out := make(map[string]string, len(m))
	for _, k := range keys {
		key := all[:len(k)]
		all = all[len(k):]
		value := all[:len(m[k])]
		all = all[len(m[k]):]
		out[key] = value
	}
	return out
}

// packBytes copies m with the keys substrings of one string and the values slices of one
// array (each capped at its end, so an append never writes into the next).
func packBytes(m map[string][]byte) map[string][]byte {
	if m == nil {
		return nil
	}
	keys, keyBytes, valueBytes := keysOf(m)
	var kb strings.Builder
	kb.Grow(keyBytes)
	for _, k := range keys {
		kb.WriteString(k)
	}
	allKeys := kb.String()
	copies := make([]string, len(keys))
	for i, k := range keys {
		copies[i], allKeys = allKeys[:len(k)], allKeys[len(k):]
	}
	values := make([]byte, 0, valueBytes)
	return copyBytes(m, keys, copies, &values)
}

// copyBytes is m with each key keys[i] as copies[i] and each value appended to values, a
// slice of it capped at its end (an append never writes into the next).
func copyBytes(m map[string][]byte, keys, copies []string, values *[]byte) map[string][]byte {
	out := make(map[string][]byte, len(m))
	for i, k := range keys {
		if m[k] == nil { // nil and empty differ in JSON, and so in Wave's hash
			out[copies[i]] = nil
			continue
		}
		start := len(*values)
		*values = append(*values, m[k]...)
		out[copies[i]] = (*values)[start:len(*values):len(*values)]
	}
	return out
}

// keysOf returns m's keys, and how many bytes its keys and its values take.
func keysOf[V string | []byte](m map[string]V) (keys []string, keyBytes, valueBytes int) {
	keys = make([]string, 0, len(m))
	for k, v := range m {
		keys = append(keys, k)
		keyBytes += len(k)
		valueBytes += len(v)
	}
	return keys, keyBytes, valueBytes
}

// secretType is t without the decoded string for the built-in types: a few bytes allocated
// with the object's other strings, it would hold their block of the heap.
func secretType(t corev1.SecretType) corev1.SecretType {
	for _, known := range []corev1.SecretType{corev1.SecretTypeOpaque, corev1.SecretTypeServiceAccountToken, corev1.SecretTypeDockercfg,
		corev1.SecretTypeDockerConfigJson, corev1.SecretTypeBasicAuth, corev1.SecretTypeSSHAuth, corev1.SecretTypeTLS, corev1.SecretTypeBootstrapToken} {
		if t == known {
			return known
		}
	}
	return corev1.SecretType(strings.Clone(string(t)))
}
