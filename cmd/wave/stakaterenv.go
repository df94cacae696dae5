package main

import (
	"strings"

	flag "github.com/spf13/pflag"
)

// stakaterEnv is what Stakater Reloader's chart sets in its container's environment, read as
// Stakater reads it, so that the chart keeps working once its image is swapped for wave's.
type stakaterEnv struct {
	// chart: started by Stakater's chart. From 2.2.0 on it always sets
	// RELOADER_DEPLOYMENT_NAME; 2.1 and earlier (Stakater Reloader up to v1.4.5) set nothing
	// of their own but KUBERNETES_NAMESPACE (watchGlobally: false) and the --log-level their
	// default values render, which translate reads. Its probes then ask for /live and /metrics
	// on Stakater's fixed :9090 (--reloader-listen-address).
	chart bool
	// namespace: KUBERNETES_NAMESPACE, set by the chart with watchGlobally: false and no
	// namespaces list; Stakater then watches only that namespace, and so does wave unless
	// --namespaces is given.
	namespace string
	// countByNamespace: METRICS_COUNT_BY_NAMESPACE=enabled (the chart's
	// enableMetricsByNamespace) adds reloader_reload_executed_total_by_namespace.
	countByNamespace bool
}

func readStakaterEnv(getenv func(string) string) stakaterEnv {
	return stakaterEnv{
		chart:            getenv("RELOADER_DEPLOYMENT_NAME") != "" || strings.TrimSpace(getenv("KUBERNETES_NAMESPACE")) != "",
		namespace:        strings.TrimSpace(getenv("KUBERNETES_NAMESPACE")),
		countByNamespace: getenv("METRICS_COUNT_BY_NAMESPACE") == "enabled",
	}
}

// stakaterListenAddress is Stakater's fixed address (its constants.DefaultHttpListenAddr).
const stakaterListenAddress = ":9090"

func addStakaterEnvFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.stakaterListen, "reloader-listen-address", stakaterListenAddress, "when started by Stakater Reloader's chart ($RELOADER_DEPLOYMENT_NAME or $KUBERNETES_NAMESPACE set, or --log-level given, as every line of the chart renders them): where its probes and ServiceMonitor look, serving /live, /metrics (with Reloader's series) and /healthz; empty disables it.")
}
