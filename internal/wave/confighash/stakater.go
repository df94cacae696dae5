package confighash

import (
	"crypto/sha1" //nolint:gosec // Reloader's formula, compared, never trusted for security
	"encoding/base64"
	"encoding/hex"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// StakaterHash is Stakater Reloader's hash of a ConfigMap or Secret, the value of its
// STAKATER_*_CONFIGMAP / _SECRET env vars and of the hash in its last-reloaded-from
// annotation: SHA-1 of the sorted "key=value" entries joined by ";" (a ConfigMap's binaryData
// base64-encoded). wave compares it to adopt a workload Reloader kept up to date without a
// rollout; it never writes it.
func StakaterHash(obj any) string {
	var entries []string
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		for k, v := range o.Data {
			entries = append(entries, k+"="+v)
		}
		for k, v := range o.BinaryData {
			entries = append(entries, k+"="+base64.StdEncoding.EncodeToString(v))
		}
	case *corev1.Secret:
		for k, v := range o.Data {
			entries = append(entries, k+"="+string(v))
		}
	default:
		return ""
	}
	sort.Strings(entries)
	sum := sha1.Sum([]byte(strings.Join(entries, ";"))) //nolint:gosec
	return hex.EncodeToString(sum[:])
}
