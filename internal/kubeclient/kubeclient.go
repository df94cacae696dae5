// Package kubeclient turns the --kubeconfig flag into a client configuration, the way kubectl
// finds one: the flag, else $KUBECONFIG or ~/.kube/config, else the pod's service account.
package kubeclient

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Config loads the client configuration and names the user agent.
func Config(kubeconfig, userAgent string, qps float32, burst int) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		if kubeconfig != "" {
			return nil, fmt.Errorf("load --kubeconfig=%s: %w", kubeconfig, err)
		}
		return nil, fmt.Errorf("find a cluster: not running in a pod and no kubeconfig found (%w); pass --kubeconfig", err)
	}
	cfg.UserAgent = userAgent
	if qps > 0 {
		cfg.QPS, cfg.Burst = qps, burst
	}
	return cfg, nil
}
