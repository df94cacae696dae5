package rollout

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/workload"

	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

// A write that keeps failing is retried with the queue's growing backoff: the rate limiter is
// touched in one place, after the look, so a failure noted midway is not forgotten by the
// look's success. Here the failed rollout cannot be noted in its record (the API answers 500).
func TestFailingWritesBackOff(t *testing.T) {
	const key = "Deployment/ns/app"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", ResourceVersion: "7"}, Data: map[string]string{"k": "1"}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", ResourceVersion: "3", Generation: 2,
		Annotations: map[string]string{podrefs.UpdateOnConfigChangeAnnotation: "true"}}}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}}}
	digested, err := confighash.Digester{}.Transform(cm)
	require.NoError(t, err)
	used := podrefs.Extract("ns", nil, &d.Spec.Template.Spec)
	inputs := confighash.InputsOf("ns", used.Visible, func(configref.Ref) (map[string]string, bool) { return confighash.KeyDigests(digested), true })
	started := time.Now().Add(-time.Minute)
	d.Annotations[InputsAnnotation] = confighash.WithKeyID(confighash.KeyID(nil), inputs.Value)
	d.Annotations[rolloutrecord.Annotation] = rolloutrecord.Record{Change: "configmap/cm", Started: started}.String()
	d.Spec.ProgressDeadlineSeconds = new(int32)
	d.Status.ObservedGeneration = 2
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "timed out"}}

	client := fake.NewSimpleClientset(d, cm)
	patches := 0
	client.PrependReactor("patch", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		patches++
		return true, nil, apierrors.NewInternalError(assert.AnError)
	})
	inf := NewInformers(workload.Clients{Kube: waveclienttest.Wrap(client)}, workload.Builtin(), []string{"ns"}, labels.Everything(), time.Minute, confighash.Digester{})
	c, err := NewController(Config{Client: waveclienttest.Wrap(client), Informers: inf, Recorder: record.NewFakeRecorder(20),
		Metrics: testMetrics(), RolloutDeadline: time.Hour})
	require.NoError(t, err)
	require.NoError(t, inf.workloads["Deployment"][0].GetIndexer().Add(d))
	require.NoError(t, inf.configs[configref.ConfigMap][0].GetIndexer().Add(digested))
	c.follow.Started(key, rolloutrecord.Record{Change: "configmap/cm", Started: started}) // this replica wrote it
	defer c.queue.ShutDown()

	for try := 1; try <= 3; try++ {
		c.queue.Add(key)
		require.True(t, c.processNextWorkItem(context.Background()))
		assert.Equal(t, try, patches, "one write tried per look")
		assert.Equal(t, try, c.queue.NumRequeues(key), "after %d failed writes the backoff has grown, not been forgotten", try)
	}
}
