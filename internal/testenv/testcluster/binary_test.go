package testcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLogTailKeepsRaceReports(t *testing.T) {
	var lines []string
	lines = append(lines, "==================", "WARNING: DATA RACE", "Write at 0x1", "==================")
	for i := range 100 {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	out := logTail(strings.Join(lines, "\n"), 10)
	assert.Contains(t, out, "WARNING: DATA RACE\nWrite at 0x1\n==================")
	assert.Contains(t, out, "[94 earlier lines left out]\nline 90\n")
	assert.True(t, strings.HasSuffix(out, "line 99"))
	assert.NotContains(t, out, "line 89")
	assert.Equal(t, "a\nb\n", logTail("a\nb\n", 10))
}

// The versions said outside hack/testprograms are the ones its go.mod pins: the Kubernetes
// version stamped into the components, the Argo Rollouts version the tests name, and the Helm
// that `make release` installs.
func TestVersionsMatchTheProgramsModule(t *testing.T) {
	gomod, err := os.ReadFile(filepath.Join("..", "..", "..", programsDir, "go.mod"))
	require.NoError(t, err)
	makefile, err := os.ReadFile(filepath.Join("..", "..", "..", "Makefile"))
	require.NoError(t, err)
	required := func(module string) string {
		v, err := requiredVersion(string(gomod), module)
		require.NoError(t, err)
		return v
	}
	assert.Equal(t, KubernetesVersion, required("k8s.io/kubernetes"))
	assert.Equal(t, ArgoRolloutsVersion, required(argoRolloutsModule))
	helm := regexp.MustCompile(`(?m)^HELM_VERSION\s*:=\s*(\S+)`).FindSubmatch(makefile)
	require.NotNil(t, helm, "the Makefile sets no HELM_VERSION")
	assert.Equal(t, required("helm.sh/helm/v4"), string(helm[1]), "make release installs the Helm the tests build")
}
