package sidecarstate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/reloader/onefirst"
	"github.com/configwave/configwave/internal/wave/workload"
)

var t0 = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)

const (
	contentA = "aaaaaaaa11111111aaaaaaaa11111111"
	contentB = "bbbbbbbb22222222bbbbbbbb22222222"
)

// lease is a Lease as the sidecars write it (onefirst.LeaseStore): the record's annotations,
// its first pod as holder and its times.
func lease(name string, r onefirst.Record) coordinationv1.Lease {
	holder := r.First
	return coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: r.Annotations()},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, AcquireTime: &metav1.MicroTime{Time: r.Since}, RenewTime: &metav1.MicroTime{Time: r.Since}}}
}

func TestRecordsPicksTheWorkloadsOwnLeases(t *testing.T) {
	rec := onefirst.Record{Content: contentA, State: onefirst.Soaking, First: "web-1", Since: t0}
	web := onefirst.LeaseName("Deployment", "web", []string{"app"})
	leases := []coordinationv1.Lease{
		lease(web, rec),
		lease(onefirst.LeaseName("Deployment", "web-api", []string{"app"}), rec),                          // another workload whose name starts alike
		lease(onefirst.LeaseName("StatefulSet", "web", []string{"app"}), rec),                             // another kind
		{ObjectMeta: metav1.ObjectMeta{Name: onefirst.LeaseName("Deployment", "web", []string{"other"})}}, // not a record: left out
	}
	got := Records(leases, workload.Deployment, "web")
	if assert.Len(t, got, 1) {
		assert.Equal(t, "web-1", got[0].First)
	}
	assert.Len(t, Records(leases, workload.StatefulSet, "web"), 1)
	assert.Empty(t, Records(leases, workload.CronJob, "web"))
	assert.Len(t, Records([]coordinationv1.Lease{lease(onefirst.LeaseName("Rollout", "web", []string{"app"}), rec)}, workload.ArgoRollout, "web"), 1)
}

func TestOf(t *testing.T) {
	soaking := onefirst.Record{Content: contentB, State: onefirst.Soaking, First: "web-1", Since: t0, Good: contentA}
	promoted := onefirst.Record{Content: contentB, State: onefirst.Promoted, First: "web-1", Since: t0, Good: contentB, Before: contentA,
		Batch: map[string]time.Time{"web-2": t0.Add(time.Minute)}}
	rejected := onefirst.Record{Content: contentB, State: onefirst.Rejected, First: "web-1", Since: t0, Good: contentA, Reason: "readiness failed 3 times"}
	for _, tc := range []struct {
		name string
		recs []onefirst.Record
		pod  string
		want string
	}{
		{"no Lease: nothing to say", nil, "web-1", ""},
		{"the first pod soaks the new config", []onefirst.Record{soaking}, "web-1", "under trial: tries config bbbbbbbb first, since 2026-12-06T10:00:00Z"},
		{"another pod keeps the promoted one meanwhile", []onefirst.Record{soaking}, "web-2", "keeps config aaaaaaaa while pod web-1 tries config bbbbbbbb first"},
		{"no config promoted yet", []onefirst.Record{{Content: contentB, State: onefirst.Soaking, First: "web-1", Since: t0}}, "web-2",
			"keeps the config it started with while pod web-1 tries config bbbbbbbb first"},
		{"released: no pod tries it now", []onefirst.Record{{Content: contentB, State: onefirst.Soaking, Good: contentA}}, "web-2",
			"keeps config aaaaaaaa; config bbbbbbbb waits for a pod to try it first"},
		{"promoted: a pod of the batch soaks it", []onefirst.Record{promoted}, "web-2", "under trial: soaks config bbbbbbbb in a batch, since 2026-12-06T10:01:00Z"},
		{"promoted: the others take it in their batch", []onefirst.Record{promoted}, "web-3", "config bbbbbbbb promoted: each pod takes it in its batch (this one has it, or waits for its turn)"},
		{"rejected after its promotion by a pod of a batch: not the first pod's failure", []onefirst.Record{{Content: contentB, State: onefirst.Rejected, First: "web-1", Good: contentA, TakenBack: contentB, Reason: "exit 1"}}, "web-1",
			"rejected after its promotion, on a pod of a batch: config bbbbbbbb (exit 1) taken back from every pod; back on config aaaaaaaa"},
		{"a reason written to draw lines of its own stays on one line", []onefirst.Record{{Content: contentB, State: onefirst.Rejected, First: "web-1", Good: contentA, Reason: "x\n└── pod/fake ready\t\x1b[31m"}}, "web-2",
			"rejected: config bbbbbbbb failed on pod web-1 (x?└── pod/fake ready??[31m); keeps config aaaaaaaa"},
		{"rejected on the first pod: back on the good one", []onefirst.Record{rejected}, "web-1", "rejected here: config bbbbbbbb failed (readiness failed 3 times); back on config aaaaaaaa"},
		{"rejected: the others keep the good one", []onefirst.Record{rejected}, "web-2", "rejected: config bbbbbbbb failed on pod web-1 (readiness failed 3 times); keeps config aaaaaaaa"},
		{"two sets of sources, one Lease each", []onefirst.Record{soaking, rejected}, "web-1",
			"under trial: tries config bbbbbbbb first, since 2026-12-06T10:00:00Z; rejected here: config bbbbbbbb failed (readiness failed 3 times); back on config aaaaaaaa"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Of(tc.recs, tc.pod))
		})
	}
	// Just restarted: the plugin keeps nothing; the same Lease read again says the same.
	again := Records([]coordinationv1.Lease{lease(onefirst.LeaseName("Deployment", "web", []string{"app"}), promoted)}, workload.Deployment, "web")
	assert.Equal(t, Of([]onefirst.Record{promoted}, "web-2"), Of(again, "web-2"))
}
