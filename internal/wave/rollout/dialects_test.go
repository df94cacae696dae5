package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/workload"

	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

func TestSelectionHonoursDialectsAndStakaterOptions(t *testing.T) {
	meta := func(ns string, a map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: "x", Annotations: a}
	}
	wave := map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}
	stakater := map[string]string{podrefs.StakaterAuto: "true"}
	of := func(obj any) workload.Workload { w, _ := workload.Of(obj); return w }
	for _, tc := range []struct {
		name     string
		dialects Dialects
		opts     StakaterOptions
		w        workload.Workload
		want     bool
	}{
		{"Wave's annotation", Dialects{}, StakaterOptions{}, of(&appsv1.Deployment{ObjectMeta: meta("a", wave)}), true},
		{"Reloader's annotation", Dialects{}, StakaterOptions{}, of(&appsv1.Deployment{ObjectMeta: meta("a", stakater)}), true},
		{"Reloader's annotation, --annotations=wave", Dialects{Wave: true}, StakaterOptions{}, of(&appsv1.Deployment{ObjectMeta: meta("a", stakater)}), false},
		{"Wave's annotation, --annotations=stakater", Dialects{Stakater: true}, StakaterOptions{}, of(&appsv1.Deployment{ObjectMeta: meta("a", wave)}), false},
		{"--namespaces-to-ignore", Dialects{}, StakaterOptions{Namespaces: map[string]bool{"a": true}}, of(&appsv1.Deployment{ObjectMeta: meta("a", wave)}), false},
		{"a CronJob", Dialects{}, StakaterOptions{}, of(&batchv1.CronJob{ObjectMeta: meta("a", stakater)}), true},
		{"a CronJob, --ignored-workload-types=cronjobs", Dialects{}, StakaterOptions{IgnoreCronJobs: true}, of(&batchv1.CronJob{ObjectMeta: meta("a", stakater)}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewSimpleClientset()
			c, err := NewController(Config{Client: waveclienttest.Wrap(client), Informers: NewInformers(workload.Clients{Kube: waveclienttest.Wrap(client)}, workload.Builtin(), []string{"a"}, labels.Everything(), time.Minute, confighash.Digester{}),
				Recorder: record.NewFakeRecorder(1), Metrics: testMetrics(),
				Dialects: tc.dialects, Reloader: tc.opts})
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.selectionOf(tc.w).optedIn())
		})
	}
}
