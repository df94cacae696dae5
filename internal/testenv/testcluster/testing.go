package testcluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"
)

// startTimeout bounds start-up when the binaries are already built; a cold build happens in
// `make controlplane` before the tests, whose own timeout covers the rest.
const startTimeout = 20 * time.Minute

// ForTest starts a cluster that belongs to one test: it is stopped when the test ends, its
// folder removed if the test passed and kept, with its path printed, if it failed.
func ForTest(t testing.TB) *Cluster { t.Helper(); return ForTestWith(t, Options{}) }

// ForTestWith is ForTest with options (Out is set to the test's log).
func ForTestWith(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the real control plane; skipped in -short mode")
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	opts.Out = testWriter{t}
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() { c.finish(t.Failed(), t.Logf) })
	return c
}

// Main runs a package's tests against one shared cluster, stored in *c before the tests run.
// Use it from TestMain; tests then call Need(t, c). In -short mode no cluster is started.
//
//	var cluster *testcluster.Cluster
//	func TestMain(m *testing.M) { testcluster.Main(m, &cluster) }
func Main(m *testing.M, c **Cluster) {
	os.Exit(Run(m, c))
}

// Run is Main for a TestMain that has more to do after the tests: it returns the exit code.
func Run(m *testing.M, c **Cluster) int {
	flag.Parse() // so testing.Short is known before m.Run
	if !testing.Short() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		cluster, err := Start(ctx, Options{Out: os.Stderr})
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "start control plane: %v\n", err)
			return 1
		}
		*c = cluster
	}
	code := m.Run()
	if *c != nil {
		(*c).finish(code != 0, func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) })
	}
	return code
}

// finish stops the cluster and removes its folder, or keeps it and says where the logs are
// when the tests failed.
func (c *Cluster) finish(failed bool, logf func(format string, args ...any)) {
	c.Stop()
	if failed {
		logf("control-plane logs kept in %s", c.LogDir())
		return
	}
	_ = c.Remove()
}

// Need skips the test when Main started no cluster (-short mode).
func Need(t testing.TB, c *Cluster) *Cluster {
	t.Helper()
	if c == nil {
		t.Skip("needs the real control plane; skipped in -short mode")
	}
	return c
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// NeedNode starts the cluster's real node (kubelet, containerd, runc) once and returns it. A
// machine that cannot run one (not root, a program missing) makes the test say why in one line
// and skip, or fail under CI=true.
func NeedNode(t testing.TB, c *Cluster) *Node {
	t.Helper()
	c = Need(t, c)
	if err := CanRunNode(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(c.holdNode())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n, err := c.Node(ctx)
	if err != nil {
		t.Fatalf("start the real node: %v", err)
	}
	return n
}
