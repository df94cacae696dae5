// Command devcluster builds the local control plane and, unless asked only to build, runs it
// until Ctrl-C so a person can point kubectl or the binaries at it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

func main() {
	buildOnly := flag.Bool("build-only", false, "build (or find in the cache) the control-plane binaries and exit")
	buildArgo := flag.Bool("build-argo-rollouts", false, "build (or find in the cache) the Argo Rollouts controller that the Rollout tests run, and exit")
	buildPromOperator := flag.Bool("build-prometheus-operator", false, "build (or find in the cache) the Prometheus Operator whose reloader containers the image tests run, and exit")
	buildHelm := flag.Bool("build-helm", false, "build (or find in the cache) Helm's CLI, which the chart tests run, and exit")
	tidy := flag.Bool("tidy-programs", false, "run go mod tidy on hack/testprograms after a version in its go.mod is changed, with its patched modules in place, and exit")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *tidy {
		if err := testcluster.TidyPrograms(ctx, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "devcluster: %v\n", err)
			os.Exit(1)
		}
		return
	}
	// Every program is one build from one module graph, so that what they share compiles once.
	var programs []string
	if *buildOnly {
		programs = append(programs, testcluster.ControlPlanePrograms...)
	}
	if *buildPromOperator {
		programs = append(programs, "operator")
	}
	if *buildHelm {
		programs = append(programs, "helm")
	}
	if *buildArgo {
		programs = append(programs, "rollouts-controller")
	}
	if len(programs) > 0 {
		start := time.Now()
		p, err := testcluster.EnsurePrograms(ctx, os.Stdout, programs...)
		if err != nil {
			fmt.Fprintf(os.Stderr, "devcluster: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("%s in %s (%s)\n", strings.Join(programs, ", "), p.Dir, time.Since(start).Round(time.Second))
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
