package target

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/wave/workload"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want Target
		err  string
	}{
		{args: []string{"deploy/web"}, want: Target{workload.Deployment, "web"}},
		{args: []string{"Deployment.apps/web"}, want: Target{workload.Deployment, "web"}},
		{args: []string{"sts", "db"}, want: Target{workload.StatefulSet, "db"}},
		{args: []string{"ds/agent"}, want: Target{workload.DaemonSet, "agent"}},
		{args: []string{"cronjobs.batch/report"}, want: Target{workload.CronJob, "report"}},
		{args: []string{"rollout/web"}, want: Target{workload.ArgoRollout, "web"}},
		{args: []string{"ro/web"}, want: Target{workload.ArgoRollout, "web"}},
		{args: []string{"web"}, err: `"web" names no kind: write KIND/NAME, such as deploy/web`},
		{args: []string{"pod/web"}, err: `"pod" is not a kind configwave rolls`},
		{args: []string{"deploy/Web"}, err: `"Web" is not a workload name`},
		{args: []string{"deploy/"}, err: `"" is not a workload name`},
		{args: nil, err: "name one workload, such as deploy/web (0 arguments given)"},
		{args: []string{"deploy", "web", "extra"}, err: "(3 arguments given)"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got, err := Parse(tc.args)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	assert.Equal(t, "statefulset/db", Target{workload.StatefulSet, "db"}.String())
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"deploy/web", "sts/db", "rollout/a.b", "x", "/", "deploy//"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Parse([]string{s})
		if err != nil {
			assert.True(t, utf8.ValidString(err.Error()) || !utf8.ValidString(s))
			return
		}
		// What parses names a kind we roll and a name the API server would take.
		assert.NotEmpty(t, got.Kind)
		assert.NotEmpty(t, got.Name)
		assert.Equal(t, strings.ToLower(got.String()), got.String())
		again, err := Parse([]string{got.String()})
		require.NoError(t, err, "a target's own name parses")
		assert.Equal(t, got, again)
	})
}
