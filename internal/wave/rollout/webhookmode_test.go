package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/csi"
	"github.com/configwave/configwave/internal/wave/podrefs"
)

// Reloader's --webhook-url mode: which notifications the webhook is told of.
func TestHookChange(t *testing.T) {
	dg := confighash.Digester{KeepLabels: true}
	cm := func(ns, value string, lbl, ann map[string]string) *confighash.Digested {
		d, err := dg.Transform(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", Labels: lbl, Annotations: ann}, Data: map[string]string{"a": value}})
		if err != nil {
			t.Fatal(err)
		}
		return d.(*confighash.Digested)
	}
	team := labels.SelectorFromSet(labels.Set{"team": "a"})
	nsLabels := func(ns string) map[string]string { return map[string]string{"team": ns} }
	for _, tc := range []struct {
		name   string
		kind   configref.Kind
		event  string
		old    any
		obj    any
		opts   StakaterOptions
		wanted string
	}{
		{"data changed", configref.ConfigMap, "update", cm("a", "1", nil, nil), cm("a", "2", nil, nil), StakaterOptions{}, "update"},
		{"metadata only", configref.ConfigMap, "update", cm("a", "1", nil, nil), cm("a", "1", map[string]string{"x": "y"}, nil), StakaterOptions{}, ""},
		{"created, without --reload-on-create", configref.ConfigMap, "create", nil, cm("a", "1", nil, nil), StakaterOptions{}, ""},
		{"created, with it", configref.ConfigMap, "create", nil, cm("a", "1", nil, nil), StakaterOptions{RollOnCreate: true}, "create"},
		{"deleted, with --reload-on-delete", configref.ConfigMap, "delete", nil, cm("a", "1", nil, nil), StakaterOptions{RollOnDelete: true}, "delete"},
		{"deleted, without", configref.ConfigMap, "delete", nil, cm("a", "1", nil, nil), StakaterOptions{}, ""},
		{"--resources-to-ignore=configmaps", configref.ConfigMap, "update", cm("a", "1", nil, nil), cm("a", "2", nil, nil), StakaterOptions{ConfigMaps: true}, ""},
		{"--namespaces-to-ignore", configref.ConfigMap, "update", cm("a", "1", nil, nil), cm("a", "2", nil, nil), StakaterOptions{Namespaces: map[string]bool{"a": true}}, ""},
		{"--resource-label-selector, not matching", configref.ConfigMap, "update", cm("a", "1", nil, nil), cm("a", "2", nil, nil), StakaterOptions{ResourceSelector: team}, ""},
		{"--resource-label-selector, matching", configref.ConfigMap, "update", cm("a", "1", nil, nil), cm("a", "2", map[string]string{"team": "a"}, nil), StakaterOptions{ResourceSelector: team}, "update"},
		{"--namespace-selector, not matching", configref.ConfigMap, "update", cm("b", "1", nil, nil), cm("b", "2", nil, nil), StakaterOptions{NamespaceSelector: team}, ""},
		{"--namespace-selector, matching", configref.ConfigMap, "update", cm("a", "1", nil, nil), cm("a", "2", nil, nil), StakaterOptions{NamespaceSelector: team}, "update"},
		{"the object says ignore: told anyway, as Reloader's webhook mode never reads it", configref.ConfigMap, "update", cm("a", "1", nil, nil), cm("a", "2", nil, map[string]string{podrefs.StakaterIgnore: "true"}), StakaterOptions{}, "update"},
		{"a tombstone's object is read", configref.ConfigMap, "delete", nil, cacheTombstone(cm("a", "1", nil, nil)), StakaterOptions{RollOnDelete: true}, "delete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref, event := hookChange(tc.kind, tc.event, tc.old, tc.obj, tc.opts, nsLabels)
			assert.Equal(t, tc.wanted, event)
			if event != "" {
				assert.Equal(t, "configmap "+ref.Namespace+"/app", ref.String())
			}
		})
	}
}

func cacheTombstone(obj any) any { return cache.DeletedFinalStateUnknown{Key: "a/app", Obj: obj} }

// A SecretProviderClass's pods' statuses: an update whose mounted versions changed is told, as
// Reloader tells it; one that changes nothing, or a namespace its filters leave out, is not.
func TestStatusChange(t *testing.T) {
	st := func(ns, hash string) *csi.Status {
		s := &csi.Status{Class: "vault", Hash: hash}
		s.Namespace, s.Name = ns, "pod-"+ns+"-vault"
		return s
	}
	nsLabels := func(ns string) map[string]string { return map[string]string{"team": ns} }
	team := labels.SelectorFromSet(labels.Set{"team": "a"})
	for _, tc := range []struct {
		name     string
		old, obj any
		opts     StakaterOptions
		wanted   string
	}{
		{"rotated", st("a", "h1"), st("a", "h2"), StakaterOptions{}, "update"},
		{"the same versions", st("a", "h1"), st("a", "h1"), StakaterOptions{}, ""},
		{"--namespaces-to-ignore", st("a", "h1"), st("a", "h2"), StakaterOptions{Namespaces: map[string]bool{"a": true}}, ""},
		{"--namespace-selector, not matching", st("b", "h1"), st("b", "h2"), StakaterOptions{NamespaceSelector: team}, ""},
		{"not a status", "x", st("a", "h2"), StakaterOptions{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref, event := statusChange(tc.old, tc.obj, tc.opts, nsLabels)
			assert.Equal(t, tc.wanted, event)
			if event != "" {
				assert.Equal(t, "secretproviderclass a/vault", ref.String())
			}
		})
	}
}
