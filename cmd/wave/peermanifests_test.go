package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/testenv/dropin"
)

// Stakater Reloader's and Wave's containers, exactly as their charts render them
// (internal/testenv/dropin/testdata), become wave's own config: the table is the peers' own manifests.
func TestPeersManifestsTranslate(t *testing.T) {
	tests := []struct {
		file, workload, container string
		check                     func(t *testing.T, c *config)
	}{
		{"stakater-reloader-chart.yaml", "reloader-reloader", "reloader-reloader", func(t *testing.T, c *config) {
			assert.Equal(t, ":9090", c.stakaterListen, "the chart's probes' port")
			assert.Empty(t, c.namespaceList, "watchGlobally")
			assert.False(t, c.leaderElection)
		}},
		{"stakater-reloader-chart-namespaced.yaml", "reloader-reloader", "reloader-reloader", func(t *testing.T, c *config) {
			assert.Equal(t, []string{"reloader"}, c.namespaceList, "KUBERNETES_NAMESPACE: its own namespace only")
		}},
		{"stakater-reloader-chart-2.1.yaml", "reloader-reloader", "reloader-reloader", func(t *testing.T, c *config) {
			assert.Equal(t, ":9090", c.stakaterListen, "the chart's probes' port, though this line sets no RELOADER_DEPLOYMENT_NAME")
			assert.Empty(t, c.namespaceList, "watchGlobally")
		}},
		{"stakater-reloader-chart-2.1-namespaced.yaml", "reloader-reloader", "reloader-reloader", func(t *testing.T, c *config) {
			assert.Equal(t, ":9090", c.stakaterListen)
			assert.Equal(t, []string{"reloader"}, c.namespaceList, "KUBERNETES_NAMESPACE: its own namespace only")
		}},
		{"wave-chart.yaml", "wave-wave", "wave-wave", func(t *testing.T, c *config) {
			assert.EqualValues(t, 1, c.updateRate)
			assert.Equal(t, 100, c.updateBurst)
			assert.Empty(t, c.stakaterListen)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			objs, err := dropin.Load(filepath.Join("..", "..", "internal", "testenv", "dropin", "testdata", tt.file))
			require.NoError(t, err)
			spec, err := dropin.PodSpec(objs, "Deployment", tt.workload)
			require.NoError(t, err)
			ctr, err := dropin.Container(spec, tt.container)
			require.NoError(t, err)
			require.Empty(t, ctr.Command, "the chart runs the image's entrypoint")
			env := map[string]string{}
			for _, e := range ctr.Env {
				switch {
				case e.ValueFrom == nil:
					env[e.Name] = e.Value
				case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
					env[e.Name] = "reloader"
				}
			}
			var o options
			fs := newFlagSet(&o)
			require.NoError(t, fs.Parse(ctr.Args))
			o.getenv = func(k string) string { return env[k] }
			c, err := o.check()
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}
