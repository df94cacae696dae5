// Command kube-scheduler is the upstream kube-scheduler, built from the k8s.io/kubernetes module
// so that tests can run a real control plane without downloading release binaries.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream registers them
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as upstream registers it
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
