package configdata

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/wave/slimcache"
)

// packAll is packObject for every object kept, once the initial lists are in, with nothing
// allocated per object but its maps: the structs lie in two arrays, every string (names,
// resourceVersions, a Secret's type, keys and string values) in one string, every byte value
// in one array. Copies made one by one went into the free slots of the spans the lists left,
// one survivor in each once the lists' objects were collected: in a heap dump of wave at
// 100,000 objects, a Secret's 6-byte type alone kept a page of 16-byte blocks per 10 Secrets
// or so (3.6 MiB for 5,000), and the 1 KiB values 2.8 MiB more.
//
// Both walks read each map in the order of its sorted keys, so the second finds every string
// where the first put it.
func packAll(objs []metav1.Object) []metav1.Object {
	var b slimcache.StringPacker
	nCM, nSecret, byteValues := 0, 0, 0
	for _, o := range objs {
		b.Add(o.GetNamespace())
		b.Add(o.GetName())
		b.Add(o.GetResourceVersion())
		switch v := o.(type) {
		case *corev1.ConfigMap:
			nCM++
			for _, k := range slices.Sorted(maps.Keys(v.Data)) {
				b.Add(k)
				b.Add(v.Data[k])
			}
			for _, k := range slices.Sorted(maps.Keys(v.BinaryData)) {
				b.Add(k)
				byteValues += len(v.BinaryData[k])
			}
		case *corev1.Secret:
			nSecret++
			b.Add(string(v.Type))
			for _, k := range slices.Sorted(maps.Keys(v.Data)) {
				b.Add(k)
				byteValues += len(v.Data[k])
			}
		}
	}
	strs := b.Strings()
	next := func() string {
		s := strs[0]
		strs = strs[1:]
		return s
	}
	values := make([]byte, 0, byteValues)
	takeBytes := func(m map[string][]byte) map[string][]byte {
		if m == nil {
			return nil
		}
		keys := slices.Sorted(maps.Keys(m))
		copies := make([]string, len(keys))
		for i := range keys {
			copies[i] = next()
		}
		return copyBytes(m, keys, copies, &values)
	}
	cms := make([]corev1.ConfigMap, 0, nCM) // exact: the pointers into them never move
	secrets := make([]corev1.Secret, 0, nSecret)
	out := make([]metav1.Object, len(objs))
	for i, o := range objs {
		meta := metav1.ObjectMeta{Namespace: next(), Name: next(), ResourceVersion: next()}
		switch v := o.(type) {
		case *corev1.ConfigMap:
			cm := corev1.ConfigMap{ObjectMeta: meta}
			if v.Data != nil {
				cm.Data = make(map[string]string, len(v.Data))
				for range len(v.Data) {
					k := next()
					cm.Data[k] = next()
				}
			}
			cm.BinaryData = takeBytes(v.BinaryData)
			cms = append(cms, cm)
			out[i] = &cms[len(cms)-1]
		case *corev1.Secret:
			s := corev1.Secret{ObjectMeta: meta, Type: corev1.SecretType(next())}
			s.Data = takeBytes(v.Data)
			secrets = append(secrets, s)
			out[i] = &secrets[len(secrets)-1]
		}
	}
	return out
}
