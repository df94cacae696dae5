package configdata

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/kube/configref"
)

// A packed copy holds exactly the data and resourceVersion, nil and empty values apart, and
// its values never share room with each other.
func TestPackKeepsTheDataExactly(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "cfg", ResourceVersion: "42", Labels: map[string]string{"dropped": "yes"}}
	for _, tc := range []struct {
		name      string
		obj, want metav1.Object
	}{
		{"configmap", &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"a": "1", "bb": "", "ccc": "three"}, BinaryData: map[string][]byte{"bin": {0, 1}, "empty": {}}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg", ResourceVersion: "42"}, Data: map[string]string{"a": "1", "bb": "", "ccc": "three"}, BinaryData: map[string][]byte{"bin": {0, 1}, "empty": {}}}},
		{"configmap without data", &corev1.ConfigMap{ObjectMeta: meta},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg", ResourceVersion: "42"}}},
		{"secret", &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("cert"), "nil": nil, "empty": {}}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg", ResourceVersion: "42"}, Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("cert"), "nil": nil, "empty": {}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, packObject(tc.obj))
		})
	}
	s := packObject(&corev1.Secret{Data: map[string][]byte{"a": []byte("x"), "b": []byte("y")}}).(*corev1.Secret)
	_ = append(s.Data["a"], 'z')
	_ = append(s.Data["b"], 'z')
	assert.Equal(t, map[string][]byte{"a": []byte("x"), "b": []byte("y")}, s.Data, "an append copies")
	assert.Nil(t, packObject(&corev1.Pod{}))
}

// Repacking keeps every object as it was, at its resourceVersion.
func TestRepackKeepsTheObjects(t *testing.T) {
	w := New()
	w.Wanted = func(configref.Ref) bool { return true }
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: "3"}, Data: map[string]string{"k": "v"}}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: "4"}, Data: map[string][]byte{"k": []byte("v")}}
	w.Offer(configref.ConfigMap, cm)
	w.Offer(configref.Secret, s)
	w.Repack()
	got, ok := w.Get(configref.Ref{Kind: configref.ConfigMap, Namespace: "ns", Name: "a"}, "3")
	require.True(t, ok)
	assert.Equal(t, cm, got, "data, names and resourceVersion")
	got, ok = w.Get(configref.Ref{Kind: configref.Secret, Namespace: "ns", Name: "a"}, "4")
	require.True(t, ok)
	assert.Equal(t, s.Data, got.(*corev1.Secret).Data)
	assert.Equal(t, 2, w.Len())
	w.Forget(configref.Ref{Kind: configref.Secret, Namespace: "ns", Name: "a"})
	_, ok = w.Get(configref.Ref{Kind: configref.Secret, Namespace: "ns", Name: "a"}, "4")
	assert.False(t, ok, "a repacked key is found and forgotten by value")
}

// packAll copies every object exactly, nil and empty apart, each value its own part of the
// shared arrays; anything but a ConfigMap or Secret comes back nil.
func TestPackAllKeepsEveryObjectExactly(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "7"}
	}
	objs := []metav1.Object{
		&corev1.ConfigMap{ObjectMeta: meta("strings"), Data: map[string]string{"b": "2", "a": "1", "same": "1"}},
		&corev1.ConfigMap{ObjectMeta: meta("binary"), Data: map[string]string{}, BinaryData: map[string][]byte{"x": {1, 2}, "nil": nil, "empty": {}}},
		&corev1.ConfigMap{ObjectMeta: meta("nothing")},
		&corev1.Secret{ObjectMeta: meta("tls"), Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}},
		&corev1.Secret{ObjectMeta: meta("custom"), Type: "example.com/custom", Data: map[string][]byte{}},
		&corev1.Pod{ObjectMeta: meta("pod")},
	}
	packed := packAll(objs)
	require.Len(t, packed, len(objs))
	for i, o := range objs[:5] {
		assert.Equal(t, o, packed[i], o.GetName())
		assert.NotSame(t, o, packed[i])
	}
	assert.Nil(t, packed[5], "a Pod is not kept")
	crt := packed[3].(*corev1.Secret).Data["tls.crt"]
	grown := append(crt, 'X')
	assert.Equal(t, "c", string(crt))
	assert.Equal(t, "k", string(packed[3].(*corev1.Secret).Data["tls.key"]), "an append copies")
	assert.Len(t, grown, 2)
}

func TestSecretTypeKeepsItsValue(t *testing.T) {
	for _, typ := range []corev1.SecretType{corev1.SecretTypeOpaque, corev1.SecretTypeTLS, "example.com/custom", ""} {
		assert.Equal(t, typ, secretType(corev1.SecretType(strings.Clone(string(typ)))))
	}
}
