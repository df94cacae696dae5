// Command reloader keeps an application's config files equal to its ConfigMaps and Secrets and
// tells the application to reload (HTTP request or signal). Its features are being built; for
// now it documents its interface and exits.
package main

import (
	"fmt"
	"os"

	flag "github.com/spf13/pflag"
)

func main() {
	fs := flag.NewFlagSet("reloader", flag.ContinueOnError)
	fs.StringArray("configmap", nil, "ConfigMap to watch, as [NAMESPACE/]NAME; repeatable")
	fs.String("configroot", "/config", "folder the ConfigMap's keys are unpacked into")
	fs.String("reload-http", "", "URL to request after the config changed (sidecar mode)")
	fs.String("reload-http-method", "POST", "HTTP method of the reload request")
	fs.String("kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	fs.Int("v", 0, "log verbosity")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return
		}
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "reloader: not implemented yet (see the open reloader issue)")
	os.Exit(1)
}
