package rollout

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/workload"

	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

// A Deployment Reloader left paused is resumed once its pause-period is over, only in a
// namespace Reloader's flags select: one --namespace-selector leaves out is left as it is, as
// Reloader would never have paused (or resumed) it.
func TestStakaterPauseResumedOnlyWhereSelected(t *testing.T) {
	paused := func(ns string) workload.Workload {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", ResourceVersion: "7",
			Annotations: map[string]string{podrefs.DefaultStakaterNames.PausedAt: time.Now().Add(-time.Hour).UTC().Format(time.RFC3339),
				podrefs.DefaultStakaterNames.PausePeriod: "5m"}}}
		d.Spec.Paused = true
		w, ok := workload.Of(d)
		require.True(t, ok)
		return w
	}
	for _, tt := range []struct {
		ns      string
		resumed bool
	}{{"team-a", true}, {"team-b", false}} {
		t.Run(tt.ns, func(t *testing.T) {
			client := fake.NewSimpleClientset(paused(tt.ns).Object)
			inf := NewInformers(workload.Clients{Kube: waveclienttest.Wrap(client)}, workload.Builtin(), nil, labels.Everything(), time.Minute, confighash.Digester{})
			inf.WatchNamespaces(waveclienttest.Wrap(client))
			for _, ns := range []*corev1.Namespace{
				{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"team": "a"}}},
				{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Labels: map[string]string{"team": "b"}}},
			} {
				require.NoError(t, inf.namespaces.GetIndexer().Add(ns))
			}
			sel, err := labels.Parse("team=a")
			require.NoError(t, err)
			c, err := NewController(Config{Client: waveclienttest.Wrap(client), Informers: inf, Recorder: record.NewFakeRecorder(10), Metrics: testMetrics(),
				Reloader: StakaterOptions{NamespaceSelector: sel}})
			require.NoError(t, err)
			client.ClearActions()
			done, err := c.finishStakaterPause(context.Background(), paused(tt.ns))
			require.NoError(t, err)
			assert.Equal(t, tt.resumed, done)
			patches := 0
			for _, a := range client.Actions() {
				if a.GetVerb() == "patch" {
					patches++
				}
			}
			assert.Equal(t, map[bool]int{true: 1, false: 0}[tt.resumed], patches)
		})
	}
}
