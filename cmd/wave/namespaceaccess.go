package main

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/wave/access"
	"github.com/configwave/configwave/internal/wave/waveclient"
)

// checkNamespaceAccess: --namespace-selector reads every namespace's labels, which takes list
// and watch on namespaces at cluster scope. Without them the namespace informer never syncs
// and wave is never ready, saying nothing; so it is checked once at the start.
func checkNamespaceAccess(ctx context.Context, client waveclient.Interface) error {
	return access.Require(ctx, client, "--namespace-selector reads the labels of namespaces",
		"grant list and watch on namespaces at cluster scope (the ClusterRole in config/wave, or the chart with rbac.clusterWide=true), or drop --namespace-selector and name the namespaces with --namespaces",
		access.Check{Verb: "list", Resource: "namespaces", Cluster: true}, access.Check{Verb: "watch", Resource: "namespaces", Cluster: true})
}

// mayWatchNamespaces says whether wave may list and watch namespaces, for the rollout windows
// set on them (configwave.io/rollout-window); where it may not, it says once that they are not
// read. config/wave-namespace-selector grants it, as the chart does with namespaceRolloutWindows.
func mayWatchNamespaces(ctx context.Context, client waveclient.Interface) (bool, error) {
	missing, err := access.Missing(ctx, client, access.Check{Verb: "list", Resource: "namespaces", Cluster: true}, access.Check{Verb: "watch", Resource: "namespaces", Cluster: true})
	if err != nil {
		return false, err
	}
	if len(missing) > 0 {
		klog.InfoS("configwave.io/rollout-window on a namespace is not read: wave may not " + missing[0].String() + "; grant list and watch on namespaces (config/wave-namespace-selector, or the chart's namespaceRolloutWindows=true), or set the window on the workloads or with --rollout-window")
		return false, nil
	}
	return true, nil
}
