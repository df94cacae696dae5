// Command wave rolls Deployments, StatefulSets and DaemonSets annotated
// wave.pusher.com/update-on-config-change when the ConfigMaps and Secrets they use change. Its
// features are being built; for now it documents its interface and exits.
package main

import (
	"fmt"
	"os"
	"time"

	flag "github.com/spf13/pflag"
)

func main() {
	fs := flag.NewFlagSet("wave", flag.ContinueOnError)
	fs.String("kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	fs.Duration("sync-period", 5*time.Minute, "how often every workload is re-checked even without events")
	fs.Bool("leader-election", false, "run as one of several replicas, only the Lease holder acting")
	fs.Int("v", 0, "log verbosity")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return
		}
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "wave: not implemented yet (see the open wave issue)")
	os.Exit(1)
}
