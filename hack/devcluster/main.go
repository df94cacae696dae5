// Command devcluster builds the local control plane and, unless asked only to build, runs it
// until Ctrl-C so a person can point kubectl or the binaries at it.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
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
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The programs of one module graph are one build, so that what they share compiles once;
	// Argo Rollouts, a module graph of its own, builds beside it.
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
	var builds []build
	if len(programs) > 0 {
		builds = append(builds, build{"programs", func(ctx context.Context, out io.Writer) (string, error) {
			p, err := testcluster.EnsurePrograms(ctx, out, programs...)
			return fmt.Sprintf("%s in %s", strings.Join(programs, ", "), p.Dir), err
		}})
	}
	if *buildArgo {
		builds = append(builds, build{"Argo Rollouts", func(ctx context.Context, out io.Writer) (string, error) {
			argo, err := testcluster.EnsureArgoRollouts(ctx, out)
			return fmt.Sprintf("Argo Rollouts controller %s at %s", testcluster.ArgoRolloutsVersion, argo.Bin), err
		}})
	}
	if len(builds) > 0 {
		if !buildAll(ctx, builds) {
			os.Exit(1)
		}
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

// build is one program the tests run, built from the module proxy into the cache.
type build struct {
	name string
	run  func(ctx context.Context, out io.Writer) (done string, err error)
}

// buildAll runs the builds at once: each spends part of its time fetching modules and linking
// on one core, which the others fill. Each line of progress names its build.
func buildAll(ctx context.Context, builds []build) bool {
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := true
	for _, b := range builds {
		wg.Go(func() {
			start := time.Now()
			out := &prefixed{prefix: "[" + b.name + "] ", mu: &mu, w: os.Stdout}
			done, err := b.run(ctx, out)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fmt.Fprintf(os.Stderr, "devcluster: %s: %v\n", b.name, err)
				ok = false
				return
			}
			fmt.Printf("%s (%s)\n", done, time.Since(start).Round(time.Second))
		})
	}
	wg.Wait()
	return ok
}

// prefixed writes whole lines, each after a prefix, so that builds running at once stay readable.
type prefixed struct {
	prefix  string
	mu      *sync.Mutex
	w       io.Writer
	pending []byte
}

func (p *prefixed) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = append(p.pending, b...)
	for {
		i := bytes.IndexByte(p.pending, '\n')
		if i < 0 {
			return len(b), nil
		}
		if _, err := fmt.Fprintf(p.w, "%s%s", p.prefix, p.pending[:i+1]); err != nil {
			return len(b), err
		}
		p.pending = p.pending[i+1:]
	}
}
