package testcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Namespace creates a namespace named after the test and deletes it when the test ends, so
// tests sharing one cluster never see each other's objects.
func Namespace(t testing.TB, client kubernetes.Interface) string {
	t.Helper()
	name := strings.ToLower(t.Name())
	name = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, name)
	if len(name) > 40 {
		name = name[:40]
	}
	name = strings.Trim(name, "-") + "-" + fmt.Sprint(time.Now().UnixNano()%1_000_000)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// Deployment returns a minimal Deployment whose pods kwok runs.
func Deployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
				},
			},
		},
	}
}

// WaitDeploymentComplete waits until the Deployment's latest template is rolled out: every
// replica updated and available and no old replica left, as `kubectl rollout status` judges.
func WaitDeploymentComplete(ctx context.Context, client kubernetes.Interface, ns, name string, timeout time.Duration) error {
	last := "never read"
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil // the last status read says more than a timeout at the end
		}
		s := d.Status
		last = fmt.Sprintf("generation %d observed %d, replicas %d updated %d available %d (want %d)",
			d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.AvailableReplicas, wantReplicas(d))
		return DeploymentComplete(d), nil
	})
	if err != nil {
		return fmt.Errorf("deployment %s/%s did not complete its rollout: %w (last read: %s)", ns, name, err, last)
	}
	return nil
}

// DeploymentComplete says whether a Deployment's status shows its latest template rolled out:
// every replica updated and available and no old replica left, as `kubectl rollout status`
// judges.
func DeploymentComplete(d *appsv1.Deployment) bool {
	want, s := wantReplicas(d), d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want
}

func wantReplicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas != nil {
		return *d.Spec.Replicas
	}
	return 1
}

// ReplicaSets lists the ReplicaSets a Deployment owns.
func ReplicaSets(ctx context.Context, client kubernetes.Interface, d *appsv1.Deployment) ([]appsv1.ReplicaSet, error) {
	list, err := client.AppsV1().ReplicaSets(d.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector),
	})
	if err != nil {
		return nil, fmt.Errorf("list replicasets of %s/%s: %w", d.Namespace, d.Name, err)
	}
	var owned []appsv1.ReplicaSet
	for _, rs := range list.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == d.UID {
			owned = append(owned, rs)
		}
	}
	return owned, nil
}

// keepChanging calls change(1), change(2), ... every interval in the background until stop is
// called, so that a fault can be injected while changes keep coming. Errors are expected while
// the control plane is down and only counted; a change that "failed" on a timeout may still
// have been stored, so a test reads the final state back from the API. stop returns how many
// changes were tried and how many returned no error, and stops the loop with the test too.
func keepChanging(t testing.TB, interval time.Duration, change func(n int) error) (stop func() (tried, ok int)) {
	done := make(chan struct{})
	finished := make(chan struct{})
	var tried, ok int // written by the loop, read after finished is closed
	go func() {
		defer close(finished)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for n := 1; ; n++ {
			if change(n) == nil {
				ok++
			}
			tried = n
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	var once bool
	stop = func() (int, int) {
		if !once {
			once = true
			close(done)
			<-finished
		}
		return tried, ok
	}
	t.Cleanup(func() { stop() })
	return stop
}

// ChangesAcross runs change(ctx, 1), change(ctx, 2), ... every interval from one second before
// outage until one second after the API server answers again, and returns how many changes
// were tried and how many the API accepted. Each change gets 2 s.
func ChangesAcross(t testing.TB, client kubernetes.Interface, interval time.Duration, change func(ctx context.Context, n int) error, outage func()) (tried, accepted int) {
	t.Helper()
	stop := keepChanging(t, interval, func(n int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return change(ctx, n)
	})
	time.Sleep(time.Second)
	outage()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the API server did not answer within a minute of the outage: %v", err)
	}
	time.Sleep(time.Second) // changes after the recovery
	return stop()
}

// DescribePods says where the pods of ns are (node, phase, each container's state) and lists
// the namespace's Events, for a test's failure message.
func DescribePods(ctx context.Context, client kubernetes.Interface, ns string) string {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "\npod %s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, s := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "; %s ready=%t", s.Name, s.Ready)
			switch {
			case s.State.Waiting != nil:
				fmt.Fprintf(&b, " waiting: %s %s", s.State.Waiting.Reason, s.State.Waiting.Message)
			case s.State.Terminated != nil:
				fmt.Fprintf(&b, " terminated: %s (exit %d)", s.State.Terminated.Reason, s.State.Terminated.ExitCode)
			case s.State.Running != nil:
				b.WriteString(" running")
			}
		}
	}
	events, _ := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	for _, e := range events.Items {
		fmt.Fprintf(&b, "\nevent %s %s: %s", e.InvolvedObject.Name, e.Reason, e.Message)
	}
	return b.String()
}
