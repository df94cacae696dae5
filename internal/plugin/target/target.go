// Package target reads the workload a kubectl configwave command acts on, written as kubectl
// writes it: "deploy/web", "deployment.apps/web", "sts db" (two words), "rollout/web".
package target

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/configwave/configwave/internal/wave/workload"
)

// Target is one workload, by kind and name; its namespace comes from -n or the kubeconfig.
type Target struct {
	Kind workload.Kind
	Name string
}

// String is the target as kubectl names it: "deployment/web".
func (t Target) String() string { return strings.ToLower(string(t.Kind)) + "/" + t.Name }

// kinds are the names kubectl accepts for each kind (its short names, singular, plural, and
// the resource with its group), and Argo Rollouts' plugin's for a Rollout.
var kinds = map[string]workload.Kind{}

func init() {
	for kind, names := range map[workload.Kind][]string{
		workload.Deployment:  {"deploy", "deployment", "deployments", "deployment.apps", "deployments.apps"},
		workload.StatefulSet: {"sts", "statefulset", "statefulsets", "statefulset.apps", "statefulsets.apps"},
		workload.DaemonSet:   {"ds", "daemonset", "daemonsets", "daemonset.apps", "daemonsets.apps"},
		workload.CronJob:     {"cj", "cronjob", "cronjobs", "cronjob.batch", "cronjobs.batch"},
		workload.ArgoRollout: {"ro", "rollout", "rollouts", "rollout.argoproj.io", "rollouts.argoproj.io"},
	} {
		for _, n := range names {
			kinds[n] = kind
		}
	}
}

// Kinds is what a user may write before the slash, for help and errors.
const Kinds = "deploy, sts, ds, cj or rollout (or their long names)"

// Parse reads args, one "KIND/NAME" or two words "KIND NAME".
func Parse(args []string) (Target, error) {
	var kind, name string
	switch len(args) {
	case 1:
		var ok bool
		kind, name, ok = strings.Cut(args[0], "/")
		if !ok {
			return Target{}, fmt.Errorf("%q names no kind: write KIND/NAME, such as deploy/%s (KIND is %s)", args[0], args[0], Kinds)
		}
	case 2:
		kind, name = args[0], args[1]
	default:
		return Target{}, fmt.Errorf("name one workload, such as deploy/web (%d arguments given)", len(args))
	}
	k, ok := kinds[strings.ToLower(kind)]
	if !ok {
		return Target{}, fmt.Errorf("%q is not a kind configwave rolls: write %s", kind, Kinds)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return Target{}, fmt.Errorf("%q is not a workload name: %s", name, strings.Join(errs, "; "))
	}
	return Target{Kind: k, Name: name}, nil
}
