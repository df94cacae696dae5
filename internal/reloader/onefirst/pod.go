package onefirst

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// Pod is what a sidecar reads of its own pod: the workload it belongs to, whether kubelet
// reports it Ready, whether it is being deleted, and what judges its readiness.
type Pod struct {
	WorkloadKind, Workload string
	PodState
	// Probes are the readiness probes of its containers; ReadinessGates counts the spec's
	// readiness gates (conditions another controller sets).
	Probes         []Probe
	ReadinessGates int
}

// PodState is how a pod stands now, for the gate.
type PodState struct {
	Ready       bool
	Terminating bool // metadata.deletionTimestamp is set
}

// Standing is what the gate decides by.
func (p PodState) Standing() Standing {
	switch {
	case p.Terminating:
		return Terminating
	case !p.Ready:
		return NotReady
	}
	return Able
}

// Probe is one container's readiness probe: how long a failing app takes to show as not Ready.
type Probe struct {
	Container        string
	HTTPPort         string // an httpGet probe's port, a number (a name its container declares is resolved); "" for another kind
	PeriodSeconds    int32  // 0: the API's default, 10
	FailureThreshold int32  // 0: the API's default, 3
}

type podJSON struct {
	Metadata struct {
		Labels            map[string]string `json:"labels"`
		OwnerReferences   []ownerRef        `json:"ownerReferences"`
		DeletionTimestamp string            `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		Containers []struct {
			Name  string `json:"name"`
			Ports []struct {
				Name          string `json:"name"`
				ContainerPort int32  `json:"containerPort"`
			} `json:"ports"`
			ReadinessProbe *struct {
				PeriodSeconds    int32 `json:"periodSeconds"`
				FailureThreshold int32 `json:"failureThreshold"`
				HTTPGet          *struct {
					Port json.RawMessage `json:"port"`
				} `json:"httpGet"`
			} `json:"readinessProbe"`
		} `json:"containers"`
		ReadinessGates []json.RawMessage `json:"readinessGates"`
	} `json:"spec"`
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
	out.Terminating = p.Metadata.DeletionTimestamp != ""
	for _, c := range p.Spec.Containers {
		if pr := c.ReadinessProbe; pr != nil {
			probe := Probe{Container: c.Name, PeriodSeconds: pr.PeriodSeconds, FailureThreshold: pr.FailureThreshold}
			if pr.HTTPGet != nil {
				probe.HTTPPort = strings.Trim(string(pr.HTTPGet.Port), `"`)
				for _, port := range c.Ports { // a named port, as a number
					if port.Name != "" && port.Name == probe.HTTPPort {
						probe.HTTPPort = strconv.Itoa(int(port.ContainerPort))
					}
				}
			}
			out.Probes = append(out.Probes, probe)
		}
	}
	out.ReadinessGates = len(p.Spec.ReadinessGates)
	return out, nil
}

// JudgeWarnings says, at start, what keeps a soak from judging the app: nothing to judge it by
// (no readiness probe, no readiness gate, no --health-url: only a refused reload fails a
// config), or a soak shorter than a readiness probe needs to show a failing app as not Ready.
// A probe on ownPort (the reloader's own /readyz, in a sidecar that is a regular container)
// judges the reloader, not the app.
func JudgeWarnings(p Pod, soak time.Duration, healthURL, ownPort string) []string {
	p.Probes = slices.DeleteFunc(slices.Clone(p.Probes), func(pr Probe) bool { return ownPort != "" && pr.HTTPPort == ownPort })
	if len(p.Probes) == 0 && p.ReadinessGates == 0 && healthURL == "" {
		return []string{"nothing judges a new config during its soak: the pod's containers have no readiness probe and --health-url is not set, " +
			"so only a refused reload rejects a config; add a readiness probe to the app's container or set --health-url"}
	}
	var out []string
	for _, pr := range p.Probes {
		period, threshold := cmp.Or(pr.PeriodSeconds, 10), cmp.Or(pr.FailureThreshold, 3)
		if shows := time.Duration(period*threshold) * time.Second; soak < shows {
			out = append(out, fmt.Sprintf("--rollout-soak=%s is shorter than container %s's readiness probe needs to show a failing app as not Ready "+
				"(periodSeconds %d × failureThreshold %d = %s): a config that breaks the app can pass its soak; give a soak of at least %s",
				soak, pr.Container, period, threshold, shows, shows))
		}
	}
	return out
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
