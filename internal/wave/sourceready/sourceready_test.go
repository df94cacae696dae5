package sourceready

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/configwave/configwave/internal/testenv/testcerts"
)

func TestIncomplete(t *testing.T) {
	crt, key := testcerts.SelfSigned(t, "web")
	crt2, key2 := testcerts.SelfSigned(t, "web")
	for _, tc := range []struct {
		name string
		typ  corev1.SecretType
		data map[string][]byte
		want string
	}{
		{"a matching pair", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": crt, "tls.key": key}, ""},
		{"a renewal half-written: the new certificate beside the old key", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": crt2, "tls.key": key}, "tls.crt and tls.key are not a pair (the key is not the certificate's)"},
		{"an Opaque Secret with both keys is judged alike", corev1.SecretTypeOpaque, map[string][]byte{"tls.crt": crt, "tls.key": key2}, "not a pair"},
		{"an Opaque Secret of other keys: not a TLS Secret", corev1.SecretTypeOpaque, map[string][]byte{"password": []byte("x")}, ""},
		{"an Opaque Secret with a certificate only (a CA bundle)", corev1.SecretTypeOpaque, map[string][]byte{"tls.crt": crt}, ""},
		{"made empty, to be filled (cert-manager's placeholder)", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": nil, "tls.key": nil}, ""},
		{"the certificate written, the key not yet", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": crt, "tls.key": nil}, "tls.crt is there and tls.key is empty"},
		{"the key written, the certificate not yet", corev1.SecretTypeTLS, map[string][]byte{"tls.key": key}, "tls.key is there and tls.crt is empty"},
		{"not PEM at all: not judged (only a pair wave can read is one it calls broken)", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": []byte("garbage"), "tls.key": key}, ""},
		{"an encrypted key: not judged", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": crt, "tls.key": []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n")}, ""},
		{"the CA before the leaf in tls.crt, the leaf's key: the first certificate is judged", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": append(append([]byte{}, crt2...), crt...), "tls.key": key}, "not a pair"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Incomplete(tc.typ, tc.data)
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tc.want)
		})
	}
}

// FuzzIncompleteNeverShowsTheData: whatever a Secret holds, the reason names keys and what is
// wrong, never a piece of the data (a Secret's value must not reach an Event).
func FuzzIncompleteNeverShowsTheData(f *testing.F) {
	crt, key := testcerts.SelfSigned(f, "web")
	f.Add(crt, key)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nc2VjcmV0LXZhbHVl\n-----END CERTIFICATE-----\n"), []byte("secret-value"))
	f.Fuzz(func(t *testing.T, crt, key []byte) {
		why := Incomplete(corev1.SecretTypeTLS, map[string][]byte{"tls.crt": crt, "tls.key": key})
		for _, data := range [][]byte{crt, key} {
			for _, line := range strings.Split(string(data), "\n") {
				if len(line) >= 12 && !strings.HasPrefix(line, "-----") && strings.Contains(why, line) {
					t.Fatalf("the reason %q repeats data %q", why, line)
				}
			}
		}
	})
}
