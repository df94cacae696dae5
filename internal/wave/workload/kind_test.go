package workload

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/configwave/configwave/internal/wave/podrefs"

	"github.com/configwave/configwave/internal/wave/waveclient/waveclienttest"
)

// Every kind gives the same view, and reads, lists a page at a time and patches through its
// own client.
func TestKinds(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: "ns", Name: name} }
	objs := map[Kind]runtime.Object{
		Deployment:  &appsv1.Deployment{ObjectMeta: meta("d")},
		StatefulSet: &appsv1.StatefulSet{ObjectMeta: meta("s")},
		DaemonSet:   &appsv1.DaemonSet{ObjectMeta: meta("ds")},
		CronJob:     &batchv1.CronJob{ObjectMeta: meta("cj")},
		ArgoRollout: &Rollout{ObjectMeta: meta("r")},
	}
	for _, typ := range kinds {
		t.Run(string(typ.Kind()), func(t *testing.T) {
			obj := objs[typ.Kind()]
			client := clientsWith(t, obj)
			w, ok := Of(obj)
			require.True(t, ok)
			assert.Equal(t, typ.Kind(), w.Kind)
			assert.Equal(t, string(typ.Kind())+"/ns/"+w.Meta.Name, w.Key())
			for _, other := range kinds {
				if other.Kind() != typ.Kind() {
					_, ok := other.Of(obj)
					assert.False(t, ok, "%s claims a %s", other.Kind(), typ.Kind())
				}
			}

			got, err := typ.Get(context.Background(), client, "ns", w.Meta.Name)
			require.NoError(t, err)
			assert.Equal(t, w.Meta.Name, got.Meta.Name)
			list, next, err := typ.List(context.Background(), client, "ns", metav1.ListOptions{Limit: 10})
			require.NoError(t, err)
			assert.Empty(t, next)
			require.Len(t, list, 1)

			require.NoError(t, Patch(context.Background(), client, typ.Kind(), "ns", w.Meta.Name, []byte(`{"metadata":{"annotations":{"a":"b"}}}`)))
			got, err = typ.Get(context.Background(), client, "ns", w.Meta.Name)
			require.NoError(t, err)
			assert.Equal(t, "b", got.Meta.Annotations["a"])
		})
	}
	assert.ErrorContains(t, Patch(context.Background(), Clients{Kube: waveclienttest.Wrap(fake.NewSimpleClientset())}, "Job", "ns", "x", nil), `unknown workload kind "Job"`)
}

// A CronJob's restart is one Job from its template, as kubectl create job --from=cronjob/
// makes it; the other kinds' controllers roll the pods themselves.
func TestRestart(t *testing.T) {
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly", UID: "u1"}}
	cj.Spec.JobTemplate.Labels = map[string]string{"team": "a"}
	cj.Spec.JobTemplate.Annotations = map[string]string{"x": "y"}
	cj.Spec.JobTemplate.Spec.Template.Spec.Containers = []corev1.Container{{Name: "run", Image: "busybox"}}
	client := Clients{Kube: waveclienttest.Wrap(fake.NewSimpleClientset(cj))}
	w, _ := Of(cj)
	require.NoError(t, Restart(context.Background(), client, w, "change 1"))
	require.NoError(t, Restart(context.Background(), client, w, "change 1"), "tried again (a timeout, a failed write, a restart of wave): the Job is there")
	jobs, err := client.Kube.BatchV1().Jobs("ns").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, jobs.Items, 1, "one Job per change, however often it is tried")
	j := jobs.Items[0]
	assert.Equal(t, JobName("nightly", "change 1"), j.Name)
	assert.Regexp(t, `^nightly-[0-9a-f]{10}$`, j.Name)
	assert.Equal(t, map[string]string{"cronjob.kubernetes.io/instantiate": "manual", "x": "y"}, j.Annotations)
	assert.Equal(t, map[string]string{"team": "a"}, j.Labels)
	require.Len(t, j.OwnerReferences, 1)
	assert.Equal(t, "CronJob", j.OwnerReferences[0].Kind)
	assert.True(t, *j.OwnerReferences[0].Controller)
	assert.Equal(t, "busybox", j.Spec.Template.Spec.Containers[0].Image)
	assert.True(t, w.Progress.Untracked)

	require.NoError(t, Restart(context.Background(), client, w, "change 2"))
	jobs, _ = client.Kube.BatchV1().Jobs("ns").List(context.Background(), metav1.ListOptions{})
	assert.Len(t, jobs.Items, 2, "the next change, the next Job")

	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app"}}
	dw, _ := Of(d)
	require.NoError(t, Restart(context.Background(), client, dw, "change 3"))
	jobs, _ = client.Kube.BatchV1().Jobs("ns").List(context.Background(), metav1.ListOptions{})
	assert.Len(t, jobs.Items, 2, "a Deployment's restart is its template write")
	assert.Len(t, JobName(strings.Repeat("n", 52), "x"), 63, "within a Job name's 63 characters")
}

// A CronJob that is suspended, being deleted, or forbids a second Job while one runs starts
// none for a change; its next run uses the new config.
func TestRestartBlocked(t *testing.T) {
	yes := true
	now := metav1.Now()
	running := []corev1.ObjectReference{{Name: "nightly-29000000"}}
	for _, tc := range []struct {
		name string
		cj   func(*batchv1.CronJob)
		want string
	}{
		{"may start", func(*batchv1.CronJob) {}, ""},
		{"suspended", func(cj *batchv1.CronJob) { cj.Spec.Suspend = &yes }, "suspended"},
		{"being deleted", func(cj *batchv1.CronJob) { cj.DeletionTimestamp = &now }, "being deleted"},
		{"Forbid, one running", func(cj *batchv1.CronJob) {
			cj.Spec.ConcurrencyPolicy, cj.Status.Active = batchv1.ForbidConcurrent, running
		}, "concurrencyPolicy is Forbid"},
		{"Forbid, none running", func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent }, ""},
		{"Allow, one running", func(cj *batchv1.CronJob) { cj.Status.Active = running }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly"}}
			tc.cj(cj)
			w, _ := Of(cj)
			got := RestartBlocked(w)
			if tc.want == "" {
				assert.Empty(t, got)
			} else {
				assert.Contains(t, got, tc.want)
			}
		})
	}
	d, _ := Of(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", DeletionTimestamp: &now}})
	assert.Empty(t, RestartBlocked(d), "other kinds have no Job to hold back")
}

// clientsWith serves obj from the client of its kind: the typed fake for built-in kinds, the
// dynamic fake for a Rollout.
func clientsWith(t *testing.T, obj runtime.Object) Clients {
	r, ok := obj.(*Rollout)
	if !ok {
		return Clients{Kube: waveclienttest.Wrap(fake.NewSimpleClientset(obj))}
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	require.NoError(t, err)
	ro := &unstructured.Unstructured{Object: u}
	ro.SetAPIVersion("argoproj.io/v1alpha1")
	ro.SetKind("Rollout")
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{rolloutResource: "RolloutList"}, ro)
	return Clients{Kube: waveclienttest.Wrap(fake.NewSimpleClientset()), Dynamic: dyn}
}

// Rollouts are used where discovery lists them, and left out, with no error, where it does not.
func TestServed(t *testing.T) {
	kindsOf := func(ts []Type) []Kind {
		var out []Kind
		for _, t := range ts {
			out = append(out, t.Kind())
		}
		return out
	}
	builtin := []Kind{Deployment, StatefulSet, DaemonSet, CronJob}
	for _, tc := range []struct {
		name      string
		resources []*metav1.APIResourceList
		want      []Kind
	}{
		{"no Argo Rollouts", nil, builtin},
		{"its group without rollouts", []*metav1.APIResourceList{{GroupVersion: "argoproj.io/v1alpha1", APIResources: []metav1.APIResource{{Name: "analysisruns"}}}}, builtin},
		{"Argo Rollouts installed", []*metav1.APIResourceList{{GroupVersion: "argoproj.io/v1alpha1", APIResources: []metav1.APIResource{{Name: "rollouts"}, {Name: "rollouts/status"}}}}, append(builtin, ArgoRollout)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Served(&fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.resources}})
			require.NoError(t, err)
			assert.Equal(t, tc.want, kindsOf(got))
		})
	}
	broken := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	broken.AddReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is down")
	})
	_, err := Served(broken)
	assert.ErrorContains(t, err, "discover whether rollouts.argoproj.io are served: etcd is down")
}

// A Rollout's progress, read as kubectl argo rollouts status reads it.
func TestRolloutProgress(t *testing.T) {
	at := metav1.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	restartAt, before := metav1.Date(2026, 11, 23, 9, 5, 0, 0, time.UTC), metav1.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		status    RolloutStatus
		restartAt *metav1.Time
		want      Progress
	}{
		{"a restart asked, its pods not restarted yet: Healthy, and still rolling", RolloutStatus{ObservedGeneration: "3", Phase: "Healthy"}, &restartAt,
			Progress{Observed: true, OwnDeadline: true}},
		{"a restart asked, an earlier one recorded: still rolling", RolloutStatus{ObservedGeneration: "3", Phase: "Healthy", RestartedAt: &before}, &restartAt,
			Progress{Observed: true, OwnDeadline: true}},
		{"a restart done: recorded in status.restartedAt", RolloutStatus{ObservedGeneration: "3", Phase: "Healthy", RestartedAt: &restartAt}, &restartAt,
			Progress{Observed: true, Done: true, OwnDeadline: true}},
		{"not yet seen by its controller", RolloutStatus{ObservedGeneration: "2", Phase: "Healthy"}, nil, Progress{OwnDeadline: true}},
		{"healthy", RolloutStatus{ObservedGeneration: "3", Phase: "Healthy"}, nil, Progress{Observed: true, Done: true, OwnDeadline: true}},
		{"paused at a canary step", RolloutStatus{ObservedGeneration: "3", Phase: "Paused", Message: "CanaryPauseStep"}, nil, Progress{Observed: true, OwnDeadline: true}},
		{"progressing", RolloutStatus{ObservedGeneration: "3", Phase: "Progressing"}, nil, Progress{Observed: true, OwnDeadline: true}},
		{"degraded past its deadline", RolloutStatus{ObservedGeneration: "3", Phase: "Degraded", Message: "ProgressDeadlineExceeded: ReplicaSet \"app-5d\" has timed out progressing.",
			Conditions: []RolloutCondition{{Type: "Progressing", Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", LastUpdateTime: at}}}, nil,
			Progress{Observed: true, OwnDeadline: true, Failed: "ProgressDeadlineExceeded: ReplicaSet \"app-5d\" has timed out progressing.", FailedAt: at.Time}},
		{"degraded with no message", RolloutStatus{ObservedGeneration: "3", Phase: "Degraded"}, nil, Progress{Observed: true, OwnDeadline: true, Failed: "the Rollout is Degraded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Rollout{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Spec: RolloutSpec{RestartAt: tc.restartAt}, Status: tc.status}
			assert.Equal(t, tc.want, rolloutProgress(r))
		})
	}
}

// The informer keeps a Rollout decoded from the API's JSON, and decoding twice changes nothing.
func TestRolloutFromUnstructured(t *testing.T) {
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON([]byte(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Rollout",
		"metadata":{"namespace":"ns","name":"app","generation":4,"annotations":{"wave.pusher.com/update-on-config-change":"true"}},
		"spec":{"replicas":2,"selector":{"matchLabels":{"app":"x"}},"strategy":{"canary":{"steps":[{"setWeight":20},{"pause":{}}]}},
			"template":{"metadata":{"labels":{"app":"x"}},"spec":{"containers":[{"name":"app","image":"x","envFrom":[{"configMapRef":{"name":"cfg"}}]}]}}},
		"status":{"observedGeneration":"4","phase":"Healthy","canary":{"weights":{}}}}`)))
	obj, err := rolloutFrom(u)
	require.NoError(t, err)
	again, err := rolloutFrom(obj)
	require.NoError(t, err)
	assert.Same(t, obj, again)
	w, ok := Of(obj)
	require.True(t, ok)
	assert.Equal(t, "rollout ns/app", w.String())
	assert.True(t, w.OptedIn())
	assert.Equal(t, "cfg", w.Template.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name)
	assert.Equal(t, map[string]string{"app": "x"}, w.Selector.MatchLabels)
	assert.True(t, w.Progress.Done)
	assert.Equal(t, "argoproj.io/v1alpha1, Kind=Rollout", w.Object.GetObjectKind().GroupVersionKind().String(), "Events name it")
	cp := w.Object.DeepCopyObject().(*Rollout)
	cp.Spec.Template.Spec.Containers[0].Name = "changed"
	cp.Annotations["x"] = "y"
	assert.Equal(t, "app", w.Template.Spec.Containers[0].Name, "a deep copy")
	assert.NotContains(t, w.Meta.Annotations, "x")

	_, err = rolloutFrom(&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"namespace": "ns", "name": "bad"}, "spec": map[string]any{"replicas": "two"}}})
	assert.ErrorContains(t, err, "decode rollout ns/bad")
}

// The template patch goes where each kind keeps its pod template.
func TestTemplatePatch(t *testing.T) {
	tmpl := map[string]any{"metadata": map[string]any{"annotations": map[string]any{"a": "1"}}}
	assert.Equal(t, map[string]any{"spec": map[string]any{"template": tmpl}}, TemplatePatch(Deployment, tmpl))
	assert.Equal(t, map[string]any{"spec": map[string]any{"template": tmpl}}, TemplatePatch(ArgoRollout, tmpl))
	assert.Equal(t, map[string]any{"spec": map[string]any{"jobTemplate": map[string]any{"spec": map[string]any{"template": tmpl}}}}, TemplatePatch(CronJob, tmpl))
}

// Reloader's rollout-strategy: restart applies to Argo Rollouts only, and restarts through
// spec.restartAt.
func TestRestartsInPlace(t *testing.T) {
	at := time.Date(2026, 11, 25, 9, 0, 1, 500, time.UTC)
	r := &Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r", Annotations: map[string]string{podrefs.StakaterRolloutStrategy: "restart"}}}
	w, _ := Of(r)
	assert.True(t, RestartsInPlace(w))
	r.Annotations[podrefs.StakaterRolloutStrategy] = "rollout"
	w, _ = Of(r)
	assert.False(t, RestartsInPlace(w), "the default: a template write")
	assert.Equal(t, map[string]any{"spec": map[string]any{"restartAt": "2026-11-25T09:00:01Z"}}, RestartAtPatch(ArgoRollout, at))

	d, _ := Of(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", Annotations: map[string]string{podrefs.StakaterRolloutStrategy: "restart"}}})
	assert.False(t, RestartsInPlace(d), "a Deployment has no spec.restartAt")
	assert.Nil(t, RestartAtPatch(Deployment, at))
}
