// Command kubelet is the upstream kubelet, built from the k8s.io/kubernetes module like the
// control plane, so that tests can run a real node (containerd and runc from the distribution).
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json, as upstream registers it
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream registers them
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as upstream registers it
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
