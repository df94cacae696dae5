package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configwave/configwave/internal/wave/access"
	"github.com/configwave/configwave/internal/wave/access/accesstest"
	"github.com/configwave/configwave/internal/wave/installkey"
	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

// How wave makes its records' digests, by what RBAC allows and what exists. Where the install
// key was asked for and its Secret cannot be used, wave gets no key and an error that names the
// Secret and what to do, never a quiet fallback to unkeyed digests; where the Secret is absent
// and wave may not create it, no key and no oracle either (Secrets by their metadata).
func TestDigestKey(t *testing.T) {
	good := make([]byte, 32)
	for i := range good {
		good[i] = byte(i + 1)
	}
	secret := func(key []byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "wave", Name: "ik"}, Data: map[string][]byte{"key": key}}
	}
	rbac := func(get, create bool) func(access.Check) bool {
		return func(c access.Check) bool {
			return c.Resource == "secrets" && (c.Verb == "get" && get || c.Verb == "create" && create)
		}
	}
	ik := config{installKeyNS: "wave", installKeyName: "ik"}
	dry := ik
	dry.dryRun = true
	tests := []struct {
		name     string
		cfg      config
		allow    func(access.Check) bool
		objects  []runtime.Object
		want     installkey.Mode
		wantKey  []byte
		wantMade bool // a key made at random
		wantErr  []string
	}{
		{name: "the key in the Secret", cfg: ik, allow: rbac(true, false), objects: []runtime.Object{secret(good)}, want: installkey.ModeKeyed, wantKey: good},
		{name: "absent, wave may create it: made", cfg: ik, allow: rbac(true, true), want: installkey.ModeKeyed, wantMade: true},
		{name: "absent, wave may not create Secrets (a peer's chart): no key, Secrets by their metadata", cfg: ik, allow: rbac(true, false), want: installkey.ModeSecretsByMetadata},
		{name: "no install key asked for, --hash-key-file's key", cfg: config{hashKey: []byte("k")}, want: "hash-key-file", wantKey: []byte("k")},
		{name: `--install-key-secret="": unkeyed, on purpose`, cfg: config{}, want: installkey.ModeUnkeyed},
		{name: "may not read it", cfg: ik, allow: rbac(false, true),
			wantErr: []string{"install key wave/ik: wave may not read it", "grant get on Secret ik in namespace wave", `--install-key-secret=""`}},
		{name: "too short to be a key", cfg: ik, allow: rbac(true, true), objects: []runtime.Object{secret([]byte("abc"))},
			wantErr: []string{"install key wave/ik", "3 bytes", "wave writes nothing without it"}},
		{name: "dry run, absent, wave may create it: decided unkeyed, since nothing is written", cfg: dry, allow: rbac(true, true), want: installkey.ModeUnkeyed},
		{name: "dry run, absent, wave may not create it: as the real run", cfg: dry, allow: rbac(true, false), want: installkey.ModeSecretsByMetadata},
		{name: "dry run, too short: still refused", cfg: dry, allow: rbac(true, true), objects: []runtime.Object{secret([]byte("abc"))},
			wantErr: []string{"install key wave/ik"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.objects...)
			if tt.allow != nil {
				accesstest.Answer(client, tt.allow)
			}
			got, err := loadDigestKey(context.Background(), waveclienttest.Wrap(client), &tt.cfg)
			if tt.wantErr == nil {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got.mode)
				switch {
				case tt.wantMade:
					assert.Len(t, got.key, installkey.Size)
				default:
					assert.Equal(t, tt.wantKey, got.key)
				}
				dg := got.digester(&tt.cfg)
				assert.Equal(t, tt.want == installkey.ModeSecretsByMetadata, dg.SecretsByMetadata, "the informers digest as the records say")
				return
			}
			require.Error(t, err)
			assert.Nil(t, got.key)
			for _, s := range tt.wantErr {
				assert.Contains(t, err.Error(), s)
			}
			assert.Equal(t, 1, strings.Count(err.Error(), "wave/ik"), "the key named once: %s", err)
		})
	}
}
