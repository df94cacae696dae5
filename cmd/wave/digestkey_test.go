package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/configwave/configwave/internal/waveclient/waveclienttest"
)

// The install key fails closed: when it was asked for and cannot be had, wave gets no key and
// an error that names the Secret and what to do, never a quiet fallback to unkeyed digests.
func TestDigestKeyFailsClosed(t *testing.T) {
	good := make([]byte, 32)
	for i := range good {
		good[i] = byte(i + 1)
	}
	secret := func(key []byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "wave", Name: "ik"}, Data: map[string][]byte{"key": key}}
	}
	forbidden := func(verb string, resources ...string) k8stesting.ReactionFunc {
		if len(resources) == 0 {
			resources = []string{"secrets"}
		}
		return func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetVerb() != verb || !slices.Contains(resources, a.GetResource().Resource) {
				return false, nil, nil
			}
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: a.GetResource().Resource}, "ik", assert.AnError)
		}
	}
	tests := []struct {
		name    string
		cfg     config
		objects []runtime.Object
		react   k8stesting.ReactionFunc
		want    []byte
		wantLen int // a key made at random
		wantErr []string
	}{
		{name: "the key in the Secret", cfg: config{installKeyNS: "wave", installKeyName: "ik"}, objects: []runtime.Object{secret(good)}, want: good},
		{name: "no install key asked for: --hash-key-file's key, or none", cfg: config{hashKey: []byte("k")}, want: []byte("k")},
		{name: "may not read it", cfg: config{installKeyNS: "wave", installKeyName: "ik"}, react: forbidden("get"),
			wantErr: []string{"install key wave/ik: wave may not read it", "grant get on Secret ik in namespace wave", `--install-key-secret=""`}},
		{name: "missing, and may not create a Secret: kept keyed, in a ConfigMap (Stakater Reloader's chart)", cfg: config{installKeyNS: "wave", installKeyName: "ik"},
			react: forbidden("create"), wantLen: 32},
		{name: "missing, and may create nothing to hold it", cfg: config{installKeyNS: "wave", installKeyName: "ik"}, react: forbidden("create", "secrets", "configmaps", "leases"),
			wantErr: []string{"install key wave/ik", "kubectl -n wave create secret generic ik", "wave writes nothing without it"}},
		{name: "too short to be a key", cfg: config{installKeyNS: "wave", installKeyName: "ik"}, objects: []runtime.Object{secret([]byte("abc"))},
			wantErr: []string{"install key wave/ik", "3 bytes", "wave writes nothing without it"}},
		{name: "dry run, missing: decided unkeyed, since nothing is written", cfg: config{installKeyNS: "wave", installKeyName: "ik", options: options{dryRun: true}}},
		{name: "dry run, too short: still refused", cfg: config{installKeyNS: "wave", installKeyName: "ik", options: options{dryRun: true}}, objects: []runtime.Object{secret([]byte("abc"))},
			wantErr: []string{"install key wave/ik"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewSimpleClientset(tt.objects...)
			if tt.react != nil {
				client.PrependReactor("*", "*", tt.react)
			}
			key, err := loadDigestKey(context.Background(), waveclienttest.Wrap(client), &tt.cfg)
			if tt.wantErr == nil {
				require.NoError(t, err)
				if tt.wantLen > 0 {
					assert.Len(t, key, tt.wantLen)
					return
				}
				assert.Equal(t, tt.want, key)
				return
			}
			require.Error(t, err)
			assert.Nil(t, key)
			for _, s := range tt.wantErr {
				assert.Contains(t, err.Error(), s)
			}
			assert.Equal(t, 1, strings.Count(err.Error(), "wave/ik"), "the key named once: %s", err)
		})
	}
}
