package onefirst

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
)

// Pod is what a sidecar reads of its own pod: the workload it belongs to, and whether kubelet
// reports it Ready.
type Pod struct {
	WorkloadKind, Workload string
	Ready                  bool
}

type podJSON struct {
	Metadata struct {
		Labels          map[string]string `json:"labels"`
		OwnerReferences []ownerRef        `json:"ownerReferences"`
	} `json:"metadata"`
	Status struct {
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
	} `json:"status"`
}

type ownerRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Controller *bool  `json:"controller"`
}

// ReadPod reads the pod namespace/name through the reloader's core/v1 client, as JSON.
func ReadPod(ctx context.Context, client rest.Interface, namespace, name string) (Pod, error) {
	raw, err := client.Get().AbsPath("/api/v1/namespaces/"+namespace+"/pods/"+name).SetHeader("Accept", "application/json").Do(ctx).Raw()
	if err != nil {
		return Pod{}, fmt.Errorf("read pod %s/%s: %w", namespace, name, err)
	}
	var p podJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return Pod{}, fmt.Errorf("read pod %s/%s: %w", namespace, name, err)
	}
	var out Pod
	for _, o := range p.Metadata.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			out.WorkloadKind, out.Workload = WorkloadOf(o.Kind, o.Name, p.Metadata.Labels)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" {
			out.Ready = c.Status == "True"
		}
	}
	return out, nil
}

// WorkloadOf is the workload a pod's controller stands for: a ReplicaSet's Deployment (or Argo
// Rollout), named by the ReplicaSet's name without the pod-template hash its pods carry, so
// that the pods of old and new ReplicaSets during a rollout agree on one record; any other
// controller is the workload itself.
func WorkloadOf(kind, name string, labels map[string]string) (string, string) {
	if kind != "ReplicaSet" {
		return kind, name
	}
	if h := labels["rollouts-pod-template-hash"]; h != "" && strings.HasSuffix(name, "-"+h) {
		return "Rollout", strings.TrimSuffix(name, "-"+h)
	}
	if h := labels["pod-template-hash"]; h != "" && strings.HasSuffix(name, "-"+h) {
		return "Deployment", strings.TrimSuffix(name, "-"+h)
	}
	return kind, name
}

// MaxUnavailable resolves --rollout-max-unavailable (N, or P% of replicas, rounded down as
// a Deployment's maxUnavailable is) to a count of at least 1.
func MaxUnavailable(value string, replicas int) (int, error) {
	if p, ok := strings.CutSuffix(value, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 100 {
			return 0, fmt.Errorf("--rollout-max-unavailable=%q: give a count such as 1 or a percentage from 1%% to 100%%", value)
		}
		return max(replicas*n/100, 1), nil
	}
	n, err := strconv.Atoi(value)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("--rollout-max-unavailable=%q: give a count such as 1 or a percentage from 1%% to 100%%", value)
	}
	return n, nil
}

// IsPercent says whether --rollout-max-unavailable needs the workload's replicas.
func IsPercent(value string) bool { return strings.HasSuffix(value, "%") }

// replicaPaths are where each workload kind's replicas are read: the API path of its
// resource and the JSON fields, in order, that hold the count.
var replicaPaths = map[string]struct {
	resource string
	fields   []string
}{
	"Deployment":  {"/apis/apps/v1/namespaces/%s/deployments/%s", []string{"spec", "replicas"}},
	"StatefulSet": {"/apis/apps/v1/namespaces/%s/statefulsets/%s", []string{"spec", "replicas"}},
	"DaemonSet":   {"/apis/apps/v1/namespaces/%s/daemonsets/%s", []string{"status", "desiredNumberScheduled"}},
	"Rollout":     {"/apis/argoproj.io/v1alpha1/namespaces/%s/rollouts/%s", []string{"spec", "replicas"}},
}

// Replicas reads how many pods the workload wants, for a percentage of them.
func Replicas(ctx context.Context, client rest.Interface, namespace, kind, name string) (int, error) {
	p, ok := replicaPaths[kind]
	if !ok {
		return 0, fmt.Errorf("a percentage in --rollout-max-unavailable needs the workload's replicas, and a %s has none: give a count", kind)
	}
	raw, err := client.Get().AbsPath(fmt.Sprintf(p.resource, namespace, name)).SetHeader("Accept", "application/json").Do(ctx).Raw()
	if err != nil {
		return 0, fmt.Errorf("read %s %s/%s for the replicas of --rollout-max-unavailable: %w", kind, namespace, name, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return 0, fmt.Errorf("read %s %s/%s: %w", kind, namespace, name, err)
	}
	var v any = obj
	for _, f := range p.fields {
		m, _ := v.(map[string]any)
		v = m[f]
	}
	n, _ := v.(float64)
	return max(int(n), 1), nil
}
