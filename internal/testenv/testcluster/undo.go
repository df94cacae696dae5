package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// RolloutUndo is `kubectl rollout undo deployment/NAME`, as kubectl v0.37's
// DeploymentRollbacker does it: the ReplicaSet of the revision before the current one gives
// back the template (without its pod-template-hash label) and every annotation but the
// Deployment's own revision bookkeeping, in one JSON patch.
func RolloutUndo(ctx context.Context, client kubernetes.Interface, ns, name string) error {
	d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read deployment %s/%s: %w", ns, name, err)
	}
	rss, err := ReplicaSets(ctx, client, d)
	if err != nil {
		return err
	}
	current, _ := strconv.Atoi(d.Annotations["deployment.kubernetes.io/revision"])
	var previous *appsv1.ReplicaSet
	best := 0
	for i, rs := range rss {
		n, _ := strconv.Atoi(rs.Annotations["deployment.kubernetes.io/revision"])
		if n < current && n > best {
			previous, best = &rss[i], n
		}
	}
	if previous == nil {
		return fmt.Errorf("deployment %s/%s: no revision before %d", ns, name, current)
	}
	skip := map[string]bool{corev1.LastAppliedConfigAnnotation: true, "deployment.kubernetes.io/revision": true, "deployment.kubernetes.io/revision-history": true,
		"deployment.kubernetes.io/desired-replicas": true, "deployment.kubernetes.io/max-replicas": true, appsv1.DeprecatedRollbackTo: true}
	annotations := map[string]string{}
	for k := range skip {
		if v, ok := d.Annotations[k]; ok {
			annotations[k] = v
		}
	}
	for k, v := range previous.Annotations {
		if !skip[k] {
			annotations[k] = v
		}
	}
	template := previous.Spec.Template.DeepCopy()
	delete(template.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	patch, err := json.Marshal([]map[string]any{
		{"op": "replace", "path": "/spec/template", "value": template},
		{"op": "replace", "path": "/metadata/annotations", "value": annotations},
	})
	if err != nil {
		return err
	}
	if _, err := client.AppsV1().Deployments(ns).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("undo deployment %s/%s: %w", ns, name, err)
	}
	return nil
}
