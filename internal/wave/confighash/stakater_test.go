package confighash

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

// Reloader's formula, pinned by values computed outside Go (Python's hashlib): a migration
// that compared the wrong hash would roll every workload Reloader kept up to date.
func TestStakaterHashGolden(t *testing.T) {
	assert.Equal(t, "f83e99e324ba68ccc373a58ef1eb42f8ab88646a", StakaterHash(&corev1.ConfigMap{Data: map[string]string{"b": "2", "a": "1"}}))
	assert.Equal(t, "bf283deb9c93083903f3eb14a70bcaeb55717778", StakaterHash(&corev1.ConfigMap{Data: map[string]string{"k": "v"}, BinaryData: map[string][]byte{"bin": {0, 1}}}))
	assert.Equal(t, "ef1c496a196ff5903e51873eea66100d635fdfd2", StakaterHash(&corev1.Secret{Data: map[string][]byte{"password": []byte("hunter2")}}))
	assert.Empty(t, StakaterHash("not a config object"))
}
