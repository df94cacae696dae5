package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/rollout"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/workload"

	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

func TestStatusTable(t *testing.T) {
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	one := int32(1)
	dep := func(name string, ann map[string]string, done bool) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Generation: 2, Annotations: ann},
			Spec: appsv1.DeploymentSpec{Replicas: &one}}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}}}
		d.Status.ObservedGeneration = 2
		if done {
			d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas = 1, 1, 1
		}
		return d
	}
	optedIn := func(extra map[string]string) map[string]string {
		m := map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true", podrefs.ExtraSecretsAnnotation: "db", rollout.InputsAnnotation: "key=k1,configmap/cm=abc"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	rolled := rolloutrecord.Record{Change: "configmap/cm", Started: now.Add(-90 * time.Second)}.String()
	// undone: a Deployment with revisions that kubectl rollout undo put back at revision rev-1
	// after wave rolled it to rev-2.
	undone := func(d *appsv1.Deployment) *appsv1.Deployment {
		d.Labels = map[string]string{revisions.RevisionLabel: "rev-2222222222222222"}
		d.Spec.Template.Annotations = map[string]string{rollout.InputsHashAnnotation: "rev-1111111111111111"}
		return d
	}
	client := fake.NewSimpleClientset(
		dep("rolling", optedIn(map[string]string{rolloutrecord.Annotation: rolled}), false),
		dep("done", optedIn(map[string]string{rolloutrecord.Annotation: rolled}), true),
		dep("fresh", optedIn(nil), true),
		dep("broken-record", optedIn(map[string]string{rolloutrecord.Annotation: "{"}), true),
		dep("not-opted-in", nil, true),
		undone(dep("undone", optedIn(map[string]string{rolloutrecord.Annotation: rolled}), true)),
		dep("never-seen", map[string]string{podrefs.StakaterAuto: "true"}, true),
		dep("gated", optedIn(map[string]string{rolloutrecord.Annotation: rolloutrecord.Record{Pending: "configmap/cm", PendingID: "c-0123456789abcdef", PendingSince: now.Add(-time.Hour)}.String()}), true),
	)
	rows, err := collectStatus(t.Context(), workload.Clients{Kube: waveclienttest.Wrap(client)}, workload.Builtin(), nil, now, 10*time.Minute, statusFilter{dialects: rollout.Dialects{Wave: true, Stakater: true}})
	require.NoError(t, err)
	var out bytes.Buffer
	printStatusTable(&out, rows, now)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 8, out.String())
	assert.Regexp(t, `^NAMESPACE +KIND +NAME +STATE +SINCE +CONFIG +DETAIL$`, lines[0])
	assert.Regexp(t, `^ns +Deployment +broken-record +unknown +- +configmap/cm,secret/db +annotation configwave.io/rollout is not what wave writes`, lines[1])
	assert.Regexp(t, `^ns +Deployment +done +up to date +90s +configmap/cm,secret/db +configmap/cm changed$`, lines[2])
	assert.Regexp(t, `^ns +Deployment +fresh +up to date +- +configmap/cm,secret/db +$`, lines[3])
	assert.Regexp(t, `^ns +Deployment +gated +waiting for approval +60m +configmap/cm,secret/db +configmap/cm changed, and configwave.io/approval is manual: approve with kubectl configwave approve deployment/gated -n ns, or reject$`, lines[4])
	assert.Regexp(t, `^ns +Deployment +never-seen +not recorded +- +configmap/cm +wave has not looked at it: check that wave runs and watches namespace ns`, lines[5],
		"an opted-in workload wave never recorded is not up to date")
	assert.Regexp(t, `^ns +Deployment +rolling +rolling +90s +configmap/cm,secret/db +configmap/cm changed$`, lines[6])
	assert.Regexp(t, `^ns +Deployment +undone +held by a rollback +- +configmap/cm,secret/db +its template is at revision rev-1111111111111111, not the newest \(rev-2222222222222222\); the next change of its config rolls it forward$`, lines[7])

	// wave's filters, as given to wave status: the workloads they leave out say so and why.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--label-selector=team=a"}, "its labels do not match --label-selector=team=a"},
		{[]string{"--annotations=stakater"}, "it opts in only in a dialect that --annotations=stakater does not read"},
		{[]string{"--namespaces-to-ignore=other,ns"}, "its namespace is in --namespaces-to-ignore"},
	} {
		var o statusOptions
		require.NoError(t, newStatusFlagSet(&o).Parse(tc.args))
		f, err := o.filter()
		require.NoError(t, err)
		rows, err := collectStatus(t.Context(), workload.Clients{Kube: waveclienttest.Wrap(client)}, workload.Builtin(), nil, now, 10*time.Minute, f)
		require.NoError(t, err)
		for _, r := range rows {
			if r.Name == "done" {
				assert.Equal(t, rolloutrecord.FilteredOut, r.State, "%v", tc.args)
				assert.Equal(t, tc.want, r.Reason)
			}
		}
	}
}

func TestStatusRefusesBadFlagsWithOneLine(t *testing.T) {
	for _, args := range [][]string{{"-o", "yaml"}, {"--namespaces=Bad_NS"}, {"extra"}, {"--no-such-flag"}, {"--label-selector=a in (b"}, {"--annotations=helm"}} {
		assert.Equal(t, 2, runStatus(args, &bytes.Buffer{}), "%v", args)
	}
}

// wave status reads the workloads as wave runs: the annotation names Reloader's flags give,
// --auto-reload-all, --namespaces-to-ignore. Given wave's own flags, it lists what wave
// manages, no more and no less.
func TestStatusReadsWavesOwnFlags(t *testing.T) {
	d := func(ns, name string, ann map[string]string) *appsv1.Deployment {
		dd := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann}}
		dd.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app"}}
		return dd
	}
	client := fake.NewSimpleClientset(
		d("ns", "custom", map[string]string{"example.com/auto": "true"}),
		d("ns", "plain", nil),
		d("skip", "ignored-ns", map[string]string{podrefs.StakaterAuto: "true"}),
		d("ns", "csi", map[string]string{podrefs.StakaterSecretProviderClassReload: "vault-db"}),
	)
	names := func(args ...string) []string {
		var o statusOptions
		fs := newStatusFlagSet(&o)
		require.NoError(t, fs.Parse(args))
		f, err := o.filter()
		require.NoError(t, err)
		rows, err := collectStatus(t.Context(), workload.Clients{Kube: waveclienttest.Wrap(client)}, workload.Builtin(), nil, time.Now(), time.Minute, f)
		require.NoError(t, err)
		var out []string
		for _, r := range rows {
			out = append(out, r.Name+":"+string(r.State))
		}
		return out
	}
	assert.Equal(t, []string{"ignored-ns:" + string(rolloutrecord.NotRecorded)}, names(), "Reloader's default names: the custom annotation is not Reloader's")
	assert.Equal(t, []string{"custom:" + string(rolloutrecord.NotRecorded)}, names("--auto-annotation=example.com/auto"),
		"read under the name given, and only under it")
	assert.Equal(t, []string{"ignored-ns:" + string(rolloutrecord.FilteredOut)}, names("--namespaces-to-ignore=skip"))
	assert.Len(t, names("--auto-reload-all"), 4, "every workload follows its config with --auto-reload-all")
	assert.Equal(t, []string{"csi:" + string(rolloutrecord.NotRecorded), "ignored-ns:" + string(rolloutrecord.NotRecorded)}, names("--enable-csi-integration=true"),
		"Reloader's SecretProviderClass annotation counts only with --enable-csi-integration, as wave runs it")
}
