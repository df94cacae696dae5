// Package kubeclient turns the --kubeconfig flag into a client configuration, the way kubectl
// finds one: the flag, else $KUBECONFIG or ~/.kube/config, else the pod's service account.
package kubeclient

import (
	"fmt"
	"net/http"
	"path"
	"sync"

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

// Uncompressed asks the API server not to gzip its answers to cfg's clients. Since Kubernetes
// 1.37 (WatchListCompression, on by default) it gzips every event of a watch that began with a
// streamed list, as client-go's informers begin theirs, each event a gzip stream of its own:
// work on both ends of every change, for a sidecar whose few small objects gain nothing from it.
func Uncompressed(cfg *rest.Config) { cfg.DisableCompression = true }

// CountRequests makes cfg report every API request it sends (by HTTP method) to count, so a
// controller can show how many requests its work costs.
func CountRequests(cfg *rest.Config, count func(method string)) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			count(r.Method)
			return rt.RoundTrip(r)
		})
	})
}

// CountWatchRestarts makes cfg report every watch it opens to watched, with the resource
// (configmaps, deployments, ...) and whether it is one opened again: a watch on the same path
// and selectors after the first one follows a dropped connection, a 410 Gone relist, an API
// server restart or the server's routine timeout. A first watch is reported too, so that a
// counter of restarts exists at 0 before the first one, and rate() sees that one. The reloader
// counts the same thing on its own ListWatches.
func CountWatchRestarts(cfg *rest.Config, watched func(resource string, again bool)) {
	var mu sync.Mutex
	opened := map[string]bool{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if q := r.URL.Query(); q.Get("watch") == "true" || q.Get("watch") == "1" {
				key := r.URL.Path + "?" + q.Get("labelSelector") + "&" + q.Get("fieldSelector")
				mu.Lock()
				again := opened[key]
				opened[key] = true
				mu.Unlock()
				watched(path.Base(r.URL.Path), again)
			}
			return rt.RoundTrip(r)
		})
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
