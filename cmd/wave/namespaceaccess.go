package main

import (
	"context"

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
