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

	"github.com/configwave/configwave/internal/outcome"
	"github.com/configwave/configwave/internal/refs"
	"github.com/configwave/configwave/internal/workload"
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
		m := map[string]string{refs.UpdateOnConfigChangeAnnotation: "true", refs.ExtraSecretsAnnotation: "db"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	rolled := outcome.Record{Change: "configmap/cm", Started: now.Add(-90 * time.Second)}.String()
	client := fake.NewSimpleClientset(
		dep("rolling", optedIn(map[string]string{outcome.Annotation: rolled}), false),
		dep("done", optedIn(map[string]string{outcome.Annotation: rolled}), true),
		dep("fresh", optedIn(nil), true),
		dep("broken-record", optedIn(map[string]string{outcome.Annotation: "{"}), true),
		dep("not-opted-in", nil, true),
	)
	rows, err := collectStatus(t.Context(), workload.Clients{Kube: client}, workload.Builtin(), nil, now, 10*time.Minute)
	require.NoError(t, err)
	var out bytes.Buffer
	printStatusTable(&out, rows, now)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 5, out.String())
	assert.Regexp(t, `^NAMESPACE +KIND +NAME +STATE +SINCE +CONFIG +DETAIL$`, lines[0])
	assert.Regexp(t, `^ns +Deployment +broken-record +unknown +- +configmap/cm,secret/db +annotation configwave.io/rollout is not what wave writes`, lines[1])
	assert.Regexp(t, `^ns +Deployment +done +up to date +90s +configmap/cm,secret/db +configmap/cm changed$`, lines[2])
	assert.Regexp(t, `^ns +Deployment +fresh +up to date +- +configmap/cm,secret/db +$`, lines[3])
	assert.Regexp(t, `^ns +Deployment +rolling +rolling +90s +configmap/cm,secret/db +configmap/cm changed$`, lines[4])
}

func TestStatusRefusesBadFlagsWithOneLine(t *testing.T) {
	for _, args := range [][]string{{"-o", "yaml"}, {"--namespaces=Bad_NS"}, {"extra"}, {"--no-such-flag"}} {
		assert.Equal(t, 2, runStatus(args, &bytes.Buffer{}), "%v", args)
	}
}
