// Command devcluster builds the local control plane and, unless --build-only, runs it until
// Ctrl-C so a person can point kubectl or the binaries at it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	flag "github.com/spf13/pflag"

	"github.com/configwave/configwave/internal/testcluster"
)

func main() {
	buildOnly := flag.Bool("build-only", false, "build (or find in the cache) the control-plane binaries and exit")
	buildArgo := flag.Bool("build-argo-rollouts", false, "build (or find in the cache) the Argo Rollouts controller that the Rollout tests run, and exit")
	buildPromOperator := flag.Bool("build-prometheus-operator", false, "build (or find in the cache) the Prometheus Operator whose reloader containers the image tests run, and exit")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *buildArgo {
		argo, err := testcluster.EnsureArgoRollouts(ctx, os.Stdout)
		if err != nil {
			fmt.Fprintf(os.Stderr, "devcluster: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("Argo Rollouts controller %s at %s\n", testcluster.ArgoRolloutsVersion, argo.Bin)
		return
	}
	if *buildPromOperator {
		bin, err := testcluster.PrometheusOperatorBin(ctx, os.Stdout)
		if err != nil {
			fmt.Fprintf(os.Stderr, "devcluster: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("Prometheus Operator %s at %s\n", testcluster.PrometheusOperatorVersion, bin)
		return
	}
	if *buildOnly {
		bins, err := testcluster.EnsureBinaries(ctx, os.Stdout)
		if err != nil {
			fmt.Fprintf(os.Stderr, "devcluster: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("Control-plane binaries in %s\n", bins.Dir)
		return
	}
	c, err := testcluster.Start(ctx, testcluster.Options{Out: os.Stdout})
	if err != nil {
		fmt.Fprintf(os.Stderr, "devcluster: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("\nThe cluster runs until Ctrl-C. Use it with:\n  export KUBECONFIG=%s\n", c.Kubeconfig())
	<-ctx.Done()
	fmt.Println("\nStopping the control plane ...")
	c.Stop()
	_ = c.Remove()
	fmt.Println("Stopped; nothing is left running.")
}
