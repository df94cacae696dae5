package manifests_test

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		GridPos struct{ H, W, X, Y int } `json:"gridPos"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// The Grafana dashboard loads: its JSON has what Grafana needs to import it, every query is
// PromQL that a real Prometheus accepts, every configwave series it reads is one the metrics
// reference, docs/metrics.md, lists, and the chart's ConfigMap carries the file as it is.
func TestGrafanaDashboard(t *testing.T) {
	prometheus := testcluster.NeedProgram(t, "prometheus", "prometheus")
	file := filepath.Join(root, "charts", "configwave", "files", "grafana-dashboard.json")
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d))
	require.NotEmpty(t, d.Title)
	require.NotEmpty(t, d.UID)
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	assert.Equal(t, []string{"datasource", "namespace"}, vars, "the data source is chosen on import; the namespaces are a filter")

	var exprs []string
	ids := map[int]bool{}
	for _, p := range d.Panels {
		assert.False(t, ids[p.ID], "panel id %d twice", p.ID)
		ids[p.ID] = true
		assert.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, "%s: inside the 24 columns", p.Title)
		if p.Type == "row" {
			continue
		}
		assert.Equal(t, "${datasource}", p.Datasource.UID, "%s: reads the chosen data source", p.Title)
		require.NotEmpty(t, p.Targets, "%s: no query", p.Title)
		for _, target := range p.Targets {
			exprs = append(exprs, target.Expr)
		}
	}
	require.Greater(t, len(exprs), 20)

	// Every configwave series read is in the metrics reference, docs/metrics.md.
	documented := map[string]bool{}
	for _, binary := range []string{"reloader", "wave"} {
		names, err := testcluster.DocumentedMetrics(filepath.Join(root, "docs", "metrics.md"), binary)
		require.NoError(t, err)
		for _, n := range names {
			documented[n] = true
		}
	}
	series := regexp.MustCompile(`\bconfigwave_[a-z_]+\b`)
	var read []string
	for _, e := range exprs {
		for _, name := range series.FindAllString(e, -1) {
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				name = strings.TrimSuffix(name, suffix)
			}
			read = append(read, name)
			assert.True(t, documented[name], "%s is not in docs/metrics.md", name)
		}
	}
	slices.Sort(read)
	for _, want := range []string{"configwave_wave_workloads", "configwave_wave_trigger_duration_seconds", "configwave_reloader_reload_duration_seconds",
		"configwave_reloader_last_reload_successful", "configwave_build_info"} {
		assert.Contains(t, read, want)
	}

	// A real Prometheus parses every query (with Grafana's variables as Grafana fills them in).
	addr := testcluster.FreeAddr(t)
	config := filepath.Join(t.TempDir(), "prometheus.yml")
	require.NoError(t, os.WriteFile(config, []byte("global: {scrape_interval: 1m}\n"), 0o644))
	prom := testcluster.StartProcess(t, prometheus, nil, "--config.file="+config, "--web.listen-address="+addr,
		"--storage.tsdb.path="+t.TempDir(), "--log.level=warn")
	prom.Addr = addr
	require.Eventually(t, func() bool { code, _ := prom.Get("/-/ready"); return code == 200 }, 30*time.Second, 50*time.Millisecond, "Prometheus did not start: %s", prom.Log())
	fill := strings.NewReplacer("$__rate_interval", "2m", "$namespace", ".*")
	for _, e := range exprs {
		code, body := prom.Get("/api/v1/query?query=" + url.QueryEscape(fill.Replace(e)))
		assert.Equal(t, 200, code, "%s: %s", e, body)
	}

	// The chart's ConfigMap holds the file byte for byte, labelled for Grafana's sidecar.
	for _, o := range decode(t, helmTemplate(t, "metrics.grafanaDashboard.enabled=true")) {
		if o.GetKind() == "ConfigMap" && strings.HasSuffix(o.GetName(), "-dashboard") {
			assert.Equal(t, "1", o.GetLabels()["grafana_dashboard"])
			got, _, _ := unstructured.NestedString(o.Object, "data", "configwave.json")
			assert.Equal(t, strings.TrimRight(string(raw), "\n"), got)
			return
		}
	}
	t.Fatal("metrics.grafanaDashboard.enabled=true renders no dashboard ConfigMap")
}
