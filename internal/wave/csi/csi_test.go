package csi

import (
	"crypto/sha1" //nolint:gosec
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/slimcache"
)

func TestHashIsReloaders(t *testing.T) {
	// Reloader: values "ID=VERSION" per object plus "SecretProviderClassName=NAME", sorted,
	// joined with ";", SHA-1 in lower-case hex.
	want := fmt.Sprintf("%x", sha1.Sum([]byte("SecretProviderClassName=vault;secret/a=2;secret/b=7"))) //nolint:gosec
	assert.Equal(t, want, Hash("vault", []Object{{"secret/b", "7"}, {"secret/a", "2"}}))
	assert.Equal(t, Hash("vault", []Object{{"secret/a", "2"}, {"secret/b", "7"}}), Hash("vault", []Object{{"secret/b", "7"}, {"secret/a", "2"}}), "order does not matter")
	assert.NotEqual(t, Hash("vault", []Object{{"secret/a", "2"}}), Hash("vault", []Object{{"secret/a", "3"}}))
	assert.NotEqual(t, Hash("vault", nil), Hash("other", nil), "the class name is part of it")
}

func podStatus(ns, name string, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetResourceVersion("7")
	return u
}

func TestTransform(t *testing.T) {
	got, err := Transform(podStatus("web", "p-web-vault", map[string]any{
		"podName": "p", "secretProviderClassName": "vault", "mounted": true,
		"objects": []any{map[string]any{"id": "secret/a", "version": "2"}},
	}))
	require.NoError(t, err)
	assert.Equal(t, &Status{Class: "vault", Hash: Hash("vault", []Object{{"secret/a", "2"}})}, &Status{Class: got.(*Status).Class, Hash: got.(*Status).Hash})
	assert.Equal(t, "web", got.(*Status).Namespace)
	assert.Equal(t, "7", got.(*Status).ResourceVersion)
	again, err := Transform(got)
	require.NoError(t, err)
	assert.Same(t, got, again, "a transformed status is kept as it is")

	for name, status := range map[string]map[string]any{
		"status.objects":                 {"secretProviderClassName": "vault", "objects": "secret/a"},
		"status.objects[0]":              {"secretProviderClassName": "vault", "objects": []any{"secret/a"}},
		"status.secretProviderClassName": {"secretProviderClassName": 3},
	} {
		got, err := Transform(podStatus("web", "bad", status))
		require.NoError(t, err, "%s: an error would fail the informer's whole list", name)
		assert.Equal(t, &Status{Identity: slimcache.Identity{Namespace: "web", Name: "bad", ResourceVersion: got.(*Status).ResourceVersion}, UnreadableField: name}, got,
			"%s: a status of no class, which the tracker leaves out", name)
	}
}

func TestClassesOf(t *testing.T) {
	csi := func(name, driver, class string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: driver, VolumeAttributes: map[string]string{ClassAttribute: class}}}}
	}
	spec := &corev1.PodSpec{Volumes: []corev1.Volume{
		csi("a", Driver, "vault"), csi("b", Driver, "vault"), csi("c", "other.csi.example.com", "x"), csi("d", Driver, ""),
		{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
		csi("unmounted", Driver, "never"),
	}, Containers: []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: "b"}, {Name: "c"}, {Name: "d"}}}},
		InitContainers: []corev1.Container{{Name: "init", VolumeMounts: []corev1.VolumeMount{{Name: "a"}}}}}
	assert.Equal(t, map[string]string{"vault": `volume "a"`}, ClassesOf(spec))
}

func TestMajority(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"b"}, "b"},
		{[]string{"b", "a", "b"}, "b"},
		{[]string{"a", "b", "b"}, "b"},
		{[]string{"b", "a"}, "a"},
		{[]string{"c", "b", "a", "c"}, "c"},
		{[]string{"c", "c", "a", "a"}, "a"},
	} {
		assert.Equal(t, tc.want, Majority(tc.in), "%v", tc.in)
	}
}

// TestTrackerMovesOnlyOnAnUpdate drives the tracker as an informer would, through a rotation:
// the first pod's update moves the class; pods that come and go, and the laggards that catch
// up, move nothing.
func TestTrackerMovesOnlyOnAnUpdate(t *testing.T) {
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, Indexers())
	tr := NewTracker()
	tr.stores = append(tr.stores, store)
	var changed []string
	tr.OnChange(func(r configref.Ref) { changed = append(changed, r.String()) })
	ref := configref.Ref{Kind: configref.SecretProviderClass, Namespace: "web", Name: "vault"}
	st := func(pod, version string) *Status {
		return &Status{Class: "vault", Hash: version, Identity: identity(pod)}
	}
	add := func(s *Status) { require.NoError(t, store.Add(s)); tr.added(s) }
	update := func(old, s *Status) { require.NoError(t, store.Update(s)); tr.updated(old, s) }
	remove := func(s *Status) { require.NoError(t, store.Delete(s)); tr.deleted(s) }
	current := func() string { h, _ := tr.Current(ref); return h }

	_, ok := tr.Current(ref)
	assert.False(t, ok, "no pod reports on it")
	a1, b1, c2 := st("a", "v1"), st("b", "v1"), st("c", "v2")
	add(a1)
	add(b1)
	add(c2) // a pod started after the provider rotated: the majority still runs v1
	assert.Equal(t, "v1", current())
	remove(a1)
	assert.Equal(t, "v1", current(), "the first look's answer stays while pods come and go")
	b2 := st("b", "v2")
	update(b1, b2) // the driver's rotation updated a pod's status
	assert.Equal(t, "v2", current())
	d2 := st("d", "v2")
	add(d2)
	update(c2, st("c", "v2")) // nothing changed
	assert.Equal(t, "v2", current())
	remove(b2)
	remove(c2)
	remove(d2)
	_, ok = tr.Current(ref)
	assert.False(t, ok, "every pod gone: the class is absent")
	e3 := st("e", "v3")
	add(e3)
	assert.Equal(t, "v3", current(), "the next pod decides again")
	assert.Contains(t, changed, ref.String())
	assert.Len(t, changed, 10, "each add, each change of versions and each delete is looked at; the update without a change is not")

	// A status that becomes unreadable is as if its pod went; readable again, as if it came.
	bad := &Status{Identity: identity("e"), UnreadableField: "status.objects[0]"}
	update(e3, bad)
	_, ok = tr.Current(ref)
	assert.False(t, ok, "its only pod unreadable: the class is absent")
	update(bad, st("e", "v4"))
	assert.Equal(t, "v4", current(), "readable again: it decides as a new pod does")
	assert.Len(t, changed, 12, "both looked at")
}

func identity(name string) (i slimcache.Identity) {
	i.Namespace, i.Name = "web", name+"-web-vault"
	return i
}

// FuzzTransform: whatever a status holds, the transform returns a *Status, never an error
// nor a panic.
func FuzzTransform(f *testing.F) {
	f.Add([]byte(`{"status":{"secretProviderClassName":"vault","objects":[{"id":"a","version":"1"}]}}`))
	f.Add([]byte(`{"status":{"objects":[null,3,"x"]}}`))
	f.Add([]byte(`{"status":7}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(b); err != nil {
			return
		}
		u.SetNamespace("web")
		u.SetName("fuzz")
		got, err := Transform(u)
		if err != nil {
			t.Fatalf("an error fails the informer's whole list: %v", err)
		}
		assert.IsType(t, &Status{}, got)
	})
}
