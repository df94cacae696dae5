package main

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// checkNamespaceAccess: --namespace-selector reads every namespace's labels, which takes list
// and watch on namespaces at cluster scope. Without them the namespace informer never syncs
// and wave is never ready, saying nothing; so it is checked once at the start.
func checkNamespaceAccess(ctx context.Context, client kubernetes.Interface) error {
	_, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return fmt.Errorf("--namespace-selector reads the labels of namespaces, and wave may not list them (%w): grant list and watch on namespaces at cluster scope (the ClusterRole in config/wave, or the chart with rbac.clusterWide=true), or drop --namespace-selector and name the namespaces with --namespaces", err)
	default:
		return fmt.Errorf("--namespace-selector: list namespaces: %w", err)
	}
}
