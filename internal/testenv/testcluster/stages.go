package testcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CrashLoopLabel, set to "true" on a pod template, makes the pods that a config rollout brings
// (those carrying wave's configwave.io/config-inputs-hash annotation) crash-loop forever under
// kwok, while the pods from before the rollout run and serve: the case of a config change
// that the app cannot start with.
const CrashLoopLabel = "configwave.test/new-pods-crash"

// NeverReadyLabel, set to "true" on a pod template, makes the pods that a config rollout
// brings run but never become ready under kwok (a readiness probe that keeps failing), while
// the pods from before the rollout serve.
const NeverReadyLabel = "configwave.test/new-pods-never-ready"

// newPodsStage is a kwok stage for the new pods of a config rollout whose template carries
// label: they run, never become ready, and each container is in state (a YAML block at the
// container's indentation). Its weight 1 makes kwok pick it over the standard pod-ready
// stage (weight 0) where both match.
func newPodsStage(name, label, containerState string) string {
	return `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: ` + name + `
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  weight: 1
  selector:
    matchLabels:
      ` + label + `: "true"
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Pending'
    - key: '.metadata.annotations["configwave.io/config-inputs-hash"]'
      operator: 'Exists'
  next:
    statusTemplate: |
      {{ $now := Now }}
      phase: Running
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        reason: ContainersNotReady
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        reason: ContainersNotReady
        type: ContainersReady
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
` + containerState + `      {{ end }}
`
}

var stages = []string{
	newPodsStage("configwave-new-pods-crash-loop", CrashLoopLabel, `        restartCount: 5
        state:
          waiting:
            reason: CrashLoopBackOff
            message: back-off 2m40s restarting failed container
`),
	newPodsStage("configwave-new-pods-never-ready", NeverReadyLabel, `        restartCount: 0
        started: true
        state:
          running:
            startedAt: {{ $now | Quote }}
`),
}

// writeStages writes the stages of our own beside the cluster and returns the path.
func writeStages(dir string) (string, error) {
	path := filepath.Join(dir, "kwok-stages-configwave.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(stages, "---\n")), 0o644); err != nil {
		return "", fmt.Errorf("write kwok stages: %w", err)
	}
	return path, nil
}
