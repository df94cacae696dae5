package testcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// Namespace is the package's Namespace for a test of c: when the test fails, what a person needs
// to see why is written, before the namespace goes, into a folder of c's log folder (which a
// failed run keeps), and the failure names it: every pod's container logs as kubelet keeps them
// (the previous run's too, for a container that restarted), the pods, the workloads and their
// ReplicaSets as `kubectl get -o yaml` shows them, a `kubectl describe`-like summary of each
// pod, the Events in time order and the Leases (one-first's rollout records, wave's leader).
func (c *Cluster) Namespace(t testing.TB, client kubernetes.Interface) string {
	t.Helper()
	ns := Namespace(t, client)
	t.Cleanup(func() { // runs before Namespace's own cleanup deletes it
		if !t.Failed() {
			return
		}
		dir := filepath.Join(c.logDir, "failed", ns)
		ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
		defer cancel()
		if err := KeepNamespace(ctx, client, ns, dir); err != nil {
			t.Logf("what namespace %s held when the test failed, kept in %s, is incomplete: %v", ns, dir, err)
			return
		}
		t.Logf("what namespace %s held when the test failed (pods, their container logs, workloads, Events, Leases) is kept in %s", ns, dir)
	})
	return ns
}

// keepTimeout bounds the writing of a failed test's namespace: a control plane that no longer
// answers must not hold the test binary.
const keepTimeout = time.Minute

// KeepNamespace writes into dir what namespace ns holds: pods.yaml, workloads.yaml, leases.yaml,
// describe.txt (each pod's conditions and containers, as `kubectl describe pod` leads with them),
// events.txt, and logs/POD/CONTAINER.log (.previous.log for the run before a restart). It goes on
// past a part it cannot read, and returns what failed.
func KeepNamespace(ctx context.Context, client kubernetes.Interface, ns, dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return err
	}
	var errs []error
	write := func(name string, objs any, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return
		}
		b, err := yaml.Marshal(objs)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		pods = &corev1.PodList{}
	}
	write("pods.yaml", pods.Items, err)
	workloads := map[string]any{}
	if l, err := client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); err == nil {
		workloads["deployments"] = l.Items
	} else {
		errs = append(errs, err)
	}
	if l, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{}); err == nil {
		workloads["replicasets"] = l.Items
	} else {
		errs = append(errs, err)
	}
	if l, err := client.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{}); err == nil {
		workloads["statefulsets"] = l.Items
	} else {
		errs = append(errs, err)
	}
	if l, err := client.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{}); err == nil {
		workloads["daemonsets"] = l.Items
	} else {
		errs = append(errs, err)
	}
	write("workloads.yaml", workloads, nil)
	leases, err := client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		write("leases.yaml", leases.Items, nil)
	} else {
		write("leases.yaml", nil, err)
	}
	events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		errs = append(errs, os.WriteFile(filepath.Join(dir, "events.txt"), []byte(eventLines(events.Items)), 0o644))
	} else {
		errs = append(errs, fmt.Errorf("events: %w", err))
	}
	errs = append(errs, os.WriteFile(filepath.Join(dir, "describe.txt"), []byte(describePods(pods.Items)), 0o644))
	for _, p := range pods.Items {
		errs = append(errs, keepLogs(ctx, client, p, filepath.Join(dir, "logs", p.Name)))
	}
	return errors.Join(errs...)
}

// keepLogs writes each container's log of pod p into dir, and the run before for one that
// restarted.
func keepLogs(ctx context.Context, client kubernetes.Interface, p corev1.Pod, dir string) error {
	if p.Spec.NodeName == "" || p.Spec.NodeName == NodeName {
		return nil // not scheduled, or on kwok's node, which runs no container
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	restarts := map[string]int32{}
	for _, s := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		restarts[s.Name] = s.RestartCount
	}
	var errs []error
	for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		runs := map[string]bool{c.Name + ".log": false}
		if restarts[c.Name] > 0 {
			runs[c.Name+".previous.log"] = true
		}
		for file, previous := range runs {
			b, err := client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, Previous: previous, Timestamps: true}).DoRaw(ctx)
			if err != nil {
				b = []byte(fmt.Sprintf("(the log could not be read: %v)\n", err))
			}
			errs = append(errs, os.WriteFile(filepath.Join(dir, file), b, 0o644))
		}
	}
	return errors.Join(errs...)
}

// describePods is what `kubectl describe pod` leads with, for each pod: where it runs, whether
// it is being deleted, its conditions and each container's state and restarts.
func describePods(pods []corev1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "Pod %s (uid %s) on node %q: %s", p.Name, p.UID, p.Spec.NodeName, p.Status.Phase)
		if p.DeletionTimestamp != nil {
			fmt.Fprintf(&b, ", being deleted since %s", p.DeletionTimestamp.UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(&b, ", IP %s\n", p.Status.PodIP)
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(&b, "  condition %s=%s since %s %s %s\n", c.Type, c.Status, c.LastTransitionTime.UTC().Format(time.RFC3339), c.Reason, c.Message)
		}
		for _, s := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			fmt.Fprintf(&b, "  container %s ready=%t restarts=%d: %s", s.Name, s.Ready, s.RestartCount, containerState(s.State))
			if s.LastTerminationState.Terminated != nil {
				fmt.Fprintf(&b, "; last run %s", containerState(s.LastTerminationState))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return fmt.Sprintf("waiting (%s) %s", s.Waiting.Reason, s.Waiting.Message)
	case s.Running != nil:
		return "running since " + s.Running.StartedAt.UTC().Format(time.RFC3339)
	case s.Terminated != nil:
		return fmt.Sprintf("terminated (%s, exit %d) at %s %s", s.Terminated.Reason, s.Terminated.ExitCode, s.Terminated.FinishedAt.UTC().Format(time.RFC3339), s.Terminated.Message)
	}
	return "unknown"
}

// eventLines lists events oldest first, one a line, as `kubectl events` shows them.
func eventLines(events []corev1.Event) string {
	when := func(e corev1.Event) time.Time {
		switch {
		case !e.LastTimestamp.IsZero():
			return e.LastTimestamp.Time
		case !e.EventTime.IsZero():
			return e.EventTime.Time
		}
		return e.CreationTimestamp.Time
	}
	slices.SortStableFunc(events, func(a, b corev1.Event) int { return when(a).Compare(when(b)) })
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "%s %s %s/%s %s (x%d): %s\n", when(e).UTC().Format("15:04:05.000"), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, max(e.Count, 1), e.Message)
	}
	return b.String()
}
