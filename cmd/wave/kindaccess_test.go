package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/configwave/configwave/internal/wave/workload"
)

// What wave says at start, and what /readyz adds, under a peer's RBAC: one line per kind and
// namespace that is only listed or not followed, each naming what to grant.
func TestKindAccessNotes(t *testing.T) {
	a := kindAccess{
		modes: map[workload.Kind]map[string]workload.Access{
			workload.Deployment: {"": workload.Listed},
			workload.CronJob:    {"team-a": workload.Skipped, "team-b": workload.Watched},
			workload.DaemonSet:  {"": workload.Watched},
		},
		resources: map[workload.Kind]string{workload.Deployment: "deployments.apps", workload.CronJob: "cronjobs.batch", workload.DaemonSet: "daemonsets.apps"},
	}
	assert.Equal(t, []string{
		"wave may list deployments.apps but not watch them in every namespace (as Stakater Reloader's chart grants): they are listed again on every ConfigMap or Secret change and every minute; grant watch on deployments.apps to follow each change as it happens",
		"wave may not list cronjobs.batch in namespace team-a (as Wave's chart grants nothing on CronJobs): they are not followed there; grant list and watch on cronjobs.batch to have them rolled",
	}, a.notes())
	assert.Equal(t, a.notes()[0]+"\n"+a.notes()[1], a.readyDetail())
	f := a.Func()
	assert.Equal(t, workload.Listed, f(workload.Deployment, ""))
	assert.Equal(t, workload.Skipped, f(workload.CronJob, "team-a"))
	assert.Equal(t, workload.Watched, f(workload.CronJob, "team-b"))
	assert.Equal(t, workload.Watched, f(workload.StatefulSet, ""), "a kind not asked about is watched")
	assert.Empty(t, kindAccess{}.readyDetail(), "wave's own RBAC: nothing to add")
}
