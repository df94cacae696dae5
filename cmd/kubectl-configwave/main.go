// kubectl-configwave is the kubectl plugin of configwave: a workload's config history, the
// diff of its config between revisions, which pod runs which config, and an undo to a
// revision chosen by its config. It works with the user's own kubeconfig and RBAC, and talks
// to the API server only: no server of its own, no wave API.
//
//	kubectl configwave history deploy/web -n shop
//	kubectl configwave diff deploy/web --revision=3
//	kubectl configwave pods deploy/web -w
//	kubectl configwave undo deploy/web --to-revision=3
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/configwave/configwave/internal/plugin/history"
	"github.com/configwave/configwave/internal/plugin/target"
	"github.com/configwave/configwave/internal/wave/approval"
	"github.com/configwave/configwave/internal/wave/waveclient"
	"github.com/configwave/configwave/internal/wave/workload"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot(os.Stdout, os.Stderr).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// globals are kubectl's own connection flags, as every plugin of the field takes them.
type globals struct {
	loading   *clientcmd.ClientConfigLoadingRules
	overrides *clientcmd.ConfigOverrides
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{loading: clientcmd.NewDefaultClientConfigLoadingRules(), overrides: &clientcmd.ConfigOverrides{}}
	root := &cobra.Command{
		Use:   "kubectl-configwave",
		Short: "See a workload's config history and act on it",
		Long: `kubectl configwave shows which config each revision of a workload ran with, what changed
between two of them, which pod runs which, and undoes a workload to a revision chosen by its
config. A workload is named as kubectl names it: deploy/web, sts/db, ds/agent, cj/report,
rollout/web. It needs configwave's wave with config revisions on the workload
(configwave.io/revisions: "true") to show more than the live config.`,
		Version:       orDev(version),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("kubectl-configwave {{.Version}}\n") // as the other binaries print it
	root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl configwave"}
	root.SetOut(stdout)
	root.SetErr(stderr)
	flags := root.PersistentFlags()
	flags.StringVar(&g.loading.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file to use.")
	clientcmd.BindOverrideFlags(g.overrides, flags, clientcmd.RecommendedConfigOverrideFlags(""))
	root.AddCommand(newHistory(g), newDiff(g), newPods(g), newUndo(g),
		newDecide(g, "approve", approval.ApproveAnnotation, "is approved: wave rolls it now"),
		newDecide(g, "reject", approval.RejectAnnotation, "is rejected: wave does not roll it, and asks again on the next change"),
		newRollNow(g))
	return root
}

// session is what every verb starts from: clients with the user's credentials, the namespace
// (-n, else the kubeconfig's), the workload and its revisions.
type session struct {
	reader    history.Reader
	config    *rest.Config
	namespace string
	target    target.Target
	workload  workload.Workload
	revisions []history.Revision
}

func (g *globals) open(ctx context.Context, args []string) (*session, error) {
	t, err := target.Parse(args)
	if err != nil {
		return nil, err
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(g.loading, g.overrides)
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("the namespace: %w", err)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-configwave/" + orDev(version)
	kube, err := waveclient.New(cfg)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	s := &session{config: cfg, namespace: ns, target: t, reader: history.Reader{Kube: kube, Metadata: meta}}
	if t.Kind == workload.ArgoRollout {
		if s.reader.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
			return nil, err
		}
	}
	if err := s.reload(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// reload reads the workload and its revisions again.
func (s *session) reload(ctx context.Context) error {
	w, err := s.reader.Workload(ctx, s.namespace, s.target.Kind, s.target.Name)
	if err != nil {
		return explain(err, fmt.Sprintf("read %s in namespace %s", s.target, s.namespace))
	}
	revs, err := s.reader.Revisions(ctx, w)
	if err != nil {
		return explain(err, fmt.Sprintf("read the revisions of %s in namespace %s", s.target, s.namespace))
	}
	st := history.StateOf(w)
	st.Writers = s.reader.Writers(ctx, s.namespace, revs)
	history.Judge(revs, st)
	s.workload, s.revisions = w, revs
	return nil
}

// revision finds revision n of the session's workload.
func (s *session) revision(n int64) (*history.Revision, error) {
	for i := range s.revisions {
		if s.revisions[i].Number == n {
			return &s.revisions[i], nil
		}
	}
	var have []int64
	for _, r := range s.revisions {
		have = append(have, r.Number)
	}
	return nil, fmt.Errorf("%s in namespace %s has no revision %d (it has %v; see kubectl configwave history %s)", s.target, s.namespace, n, have, s.target)
}

func orDev(v string) string {
	if v == "" {
		return "dev"
	}
	return v
}
