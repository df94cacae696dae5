package main

import (
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/configwave/configwave/internal/plugin/target"
	"github.com/configwave/configwave/internal/wave/waveclient"
	"github.com/configwave/configwave/internal/wave/workload"
)

// completeWorkloads completes KIND/NAME: the kinds first, then the names of that kind in the
// namespace, read with the user's own credentials (nothing when they may not list them).
func completeWorkloads(g *globals) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		kind, prefix, ok := strings.Cut(toComplete, "/")
		if !ok {
			return []string{"deploy/", "sts/", "ds/", "cj/", "rollout/"}, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
		}
		t, err := target.Parse([]string{kind + "/x"})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(g.loading, g.overrides)
		ns, _, err := cc.Namespace()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cfg, err := cc.ClientConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		kube, err := waveclient.New(cfg)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c := workload.Clients{Kube: kube}
		if t.Kind == workload.ArgoRollout {
			if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
		}
		typ, err := workload.TypeOf(t.Kind)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ws, _, err := typ.List(cmd.Context(), c, ns, metav1.ListOptions{Limit: 500})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, w := range ws {
			if strings.HasPrefix(w.Meta.Name, prefix) {
				out = append(out, kind+"/"+w.Meta.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
