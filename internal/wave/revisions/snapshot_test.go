package revisions

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestContentID(t *testing.T) {
	a := map[string]string{"app.conf": "0f1e", "extra": "99aa"}
	// Pinned: a snapshot's name must not change under a running cluster, or every revision's
	// index would name snapshots that a new wave never finds again.
	assert.Equal(t, "08ceab41fb", ContentID(a, ""))
	assert.Equal(t, ContentID(map[string]string{"extra": "99aa", "app.conf": "0f1e"}, ""), ContentID(a, ""), "the keys' order is no content")
	for name, other := range map[string]string{
		"a key's digest":         ContentID(map[string]string{"app.conf": "0f1f", "extra": "99aa"}, ""),
		"a key's name":           ContentID(map[string]string{"app.conf2": "0f1e", "extra": "99aa"}, ""),
		"a key less":             ContentID(map[string]string{"app.conf": "0f1e"}, ""),
		"a Secret's type":        ContentID(a, "kubernetes.io/tls"),
		"names and digests swap": ContentID(map[string]string{"app.conf0f1e": "", "extra99aa": ""}, ""),
	} {
		assert.NotEqual(t, ContentID(a, ""), other, "%s makes another content", name)
	}
	assert.Len(t, ContentID(nil, ""), contentIDLen)
}

func TestSnapshotName(t *testing.T) {
	for _, tc := range []struct {
		name, source, want string
	}{
		{"a short name", "app-config", "app-config-0123456789"},
		{"a name with dots", "app.example.com", "app.example.com-0123456789"},
		{"the longest name that fits", strings.Repeat("a", 242), strings.Repeat("a", 242) + "-0123456789"},
		{"a longer name is cut", strings.Repeat("a", 253), strings.Repeat("a", 242) + "-0123456789"},
		{"a cut never ends in a dash or a dot", strings.Repeat("a", 240) + "-.b" + strings.Repeat("c", 10), strings.Repeat("a", 240) + "-0123456789"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SnapshotName(tc.source, "0123456789")
			assert.Equal(t, tc.want, got)
			assert.Empty(t, validation.IsDNS1123Subdomain(got), "a valid name for a ConfigMap or Secret")
			assert.True(t, isSnapshotOf(got, tc.source))
		})
	}
}

func TestSourceLabelValue(t *testing.T) {
	for _, tc := range []struct {
		name, source, want string
	}{
		{"a valid label value is the name", "app-config", "app-config"},
		{"dots are fine in a label value", "app.example.com", "app.example.com"},
		{"a name over 63 characters is shortened with a hash of it", strings.Repeat("a", 64), strings.Repeat("a", 52) + "-ffe054fe7a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SourceLabelValue(tc.source)
			assert.Equal(t, tc.want, got)
			assert.Empty(t, validation.IsValidLabelValue(got))
		})
	}
	assert.NotEqual(t, SourceLabelValue(strings.Repeat("a", 64)), SourceLabelValue(strings.Repeat("a", 65)), "two long names keep apart")
	assert.Empty(t, validation.IsValidLabelValue(SourceLabelValue(strings.Repeat("a", 51)+"."+strings.Repeat("b", 20))), "a cut ending in a dot is trimmed")
}

func TestSnapshotOfAConfigMapCopiesEveryKey(t *testing.T) {
	src := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "shop", UID: "u1", ResourceVersion: "7",
			Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"note": "x"},
			OwnerReferences: []metav1.OwnerReference{{Name: "helm"}}},
		Data:       map[string]string{"app.conf": "listen 80;\n", "empty": ""},
		BinaryData: map[string][]byte{"logo.png": {0x89, 'P', 'N', 'G', 0, 0xff}},
	}
	obj, err := SnapshotOf(src, "0123456789")
	require.NoError(t, err)
	snap := obj.(*corev1.ConfigMap)
	assert.Equal(t, "app-0123456789", snap.Name)
	assert.Equal(t, "shop", snap.Namespace)
	require.NotNil(t, snap.Immutable)
	assert.True(t, *snap.Immutable)
	assert.Equal(t, src.Data, snap.Data)
	assert.Equal(t, src.BinaryData, snap.BinaryData)
	assert.Equal(t, map[string]string{SnapshotOfLabel: "app", ManagedByLabel: ManagedBy}, snap.Labels, "none of the source's labels: a selector of the source must not select its snapshots")
	assert.Equal(t, map[string]string{SnapshotOfAnnotation: "app", ContentAnnotation: "0123456789"}, snap.Annotations)
	assert.Empty(t, snap.OwnerReferences)
	assert.Empty(t, snap.UID)
	assert.Empty(t, snap.ResourceVersion)

	src.Data["app.conf"] = "changed"
	src.BinaryData["logo.png"][0] = 0
	assert.Equal(t, "listen 80;\n", snap.Data["app.conf"], "a copy, not the source's maps")
	assert.Equal(t, byte(0x89), snap.BinaryData["logo.png"][0])
}

func TestSnapshotOfASecretKeepsItsType(t *testing.T) {
	src := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "tls", Namespace: "shop"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": []byte("C"), "tls.key": []byte("K")},
	}
	obj, err := SnapshotOf(src, "0123456789")
	require.NoError(t, err)
	snap := obj.(*corev1.Secret)
	assert.Equal(t, "tls-0123456789", snap.Name)
	assert.Equal(t, corev1.SecretTypeTLS, snap.Type)
	assert.NotContains(t, snap.Labels, "velero.io/exclude-from-backup")

	// A Secret kept out of backups: its copies are kept out too, and carry no other label.
	src.Labels = map[string]string{"velero.io/exclude-from-backup": "true", "grafana_dashboard": "1"}
	obj, err = SnapshotOf(src, "0123456789")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{SnapshotOfLabel: "tls", ManagedByLabel: ManagedBy, "velero.io/exclude-from-backup": "true"}, obj.GetLabels())
	src.Labels = map[string]string{"velero.io/exclude-from-backup": "false"}
	obj, err = SnapshotOf(src, "0123456789")
	require.NoError(t, err)
	assert.NotContains(t, obj.GetLabels(), "velero.io/exclude-from-backup", "only the value that protects")
	assert.Equal(t, src.Data, snap.Data)
	require.NotNil(t, snap.Immutable)
	assert.True(t, *snap.Immutable)
	assert.Empty(t, snap.StringData)

	_, err = SnapshotOf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop"}}, "0123456789")
	assert.ErrorContains(t, err, "snapshot of shop/p")
}
