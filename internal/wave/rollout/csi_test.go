package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/csi"
	"github.com/configwave/configwave/internal/wave/workload"

	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

// The driver's informers can be added whatever wave watches: every namespace (where an index
// on namespaces is there already) or a list of them; and the controller takes them.
func TestWatchSecretProviderClasses(t *testing.T) {
	for _, namespaces := range [][]string{nil, {"a", "b"}} {
		client := fake.NewSimpleClientset()
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
			csi.PodStatuses: "SecretProviderClassPodStatusList", csi.Classes: "SecretProviderClassList"})
		inf := NewInformers(workload.Clients{Kube: waveclienttest.Wrap(client)}, workload.Builtin(), namespaces, labels.Everything(), time.Minute, confighash.Digester{})
		require.NoError(t, inf.WatchSecretProviderClasses(dyn), "%v", namespaces)
		assert.Len(t, inf.configs[configref.SecretProviderClass], max(1, len(namespaces)))
		assert.Contains(t, inf.configKinds(), configref.SecretProviderClass)
		_, err := NewController(Config{Client: waveclienttest.Wrap(client), Informers: inf})
		require.NoError(t, err)
	}
}
