package serve

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRegistryHasBuildInfo(t *testing.T) {
	families, err := NewRegistry("reloader", "v0.1.0").Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "configwave_build_info" {
			continue
		}
		require.Len(t, f.GetMetric(), 1)
		m := f.GetMetric()[0]
		assert.Equal(t, 1.0, m.GetGauge().GetValue())
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		assert.Equal(t, map[string]string{"binary": "reloader", "version": "v0.1.0", "goversion": runtime.Version()}, labels)
		return
	}
	t.Fatal("no configwave_build_info")
}
