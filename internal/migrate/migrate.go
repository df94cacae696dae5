// Package migrate undoes, once, what Wave up to v0.5 wrote into a cluster: owner references
// on ConfigMaps and Secrets (through which the garbage collector would delete config together
// with a workload) and its finalizer on workloads (--migrate-from-wave-v05).
//
//	report, err := migrate.FromWaveV05(ctx, client, namespaces, dryRun)
package migrate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/refs"
	"github.com/configwave/configwave/internal/workload"
)

// Report counts what MigrateFromWaveV05 changed.
type Report struct {
	OwnerReferencesRemoved int // on ConfigMaps and Secrets
	FinalizersRemoved      int // on workloads
}

// FromWaveV05 undoes what Wave up to v0.5 wrote into a cluster, once, so that the
// normal controller never needs write access to ConfigMaps and Secrets:
//   - owner references from ConfigMaps and Secrets to the workloads Wave managed (Wave added
//     them to find users; the garbage collector would delete the config with the workload);
//   - the wave.pusher.com/finalizer on those workloads, once their owner references are gone.
//
// A workload counts as Wave's when it is opted in or carries the finalizer. Nothing else is
// touched: other owner references, other finalizers, any data. Every write is an update at
// the resourceVersion read, retried on conflict. With dryRun it only reports.
func FromWaveV05(ctx context.Context, client kubernetes.Interface, namespaces []string, dryRun bool) (Report, error) {
	var rep Report
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, ns := range namespaces {
		waveOwned := map[types.UID]string{}
		var finalized []workload.Workload
		for _, t := range workload.WaveTypes() {
			items, err := listWorkloads(ctx, client, t, ns)
			if err != nil {
				return rep, err
			}
			for _, w := range items {
				if !w.OptedIn() && !slices.Contains(w.Meta.Finalizers, refs.WaveFinalizer) {
					continue
				}
				waveOwned[w.Meta.UID] = w.String()
				if slices.Contains(w.Meta.Finalizers, refs.WaveFinalizer) {
					finalized = append(finalized, w)
				}
			}
		}
		// Owner references first, finalizers only once every one is gone. A workload that is
		// being deleted waits only for Wave's finalizer; the moment it is removed the workload
		// goes, and the garbage collector deletes every ConfigMap and Secret still naming it
		// as owner. In this order a failure part-way leaves config in place, never deleted.
		n, err := removeOwnerRefs(ctx, client, ns, waveOwned, dryRun)
		rep.OwnerReferencesRemoved += n
		if err != nil {
			return rep, fmt.Errorf("%w; no finalizer was removed, so no ConfigMap or Secret can be garbage collected: fix the cause and run the migration again", err)
		}
		for _, w := range finalized {
			if err := removeFinalizer(ctx, client, w, dryRun); err != nil {
				return rep, err
			}
			rep.FinalizersRemoved++
		}
	}
	return rep, nil
}

// listWorkloads lists every workload of type t in ns.
func listWorkloads(ctx context.Context, client kubernetes.Interface, t workload.Type, ns string) ([]workload.Workload, error) {
	return allPages(ctx, strings.ToLower(string(t.Kind()))+"s", func(o metav1.ListOptions) ([]workload.Workload, string, error) {
		return t.List(ctx, workload.Clients{Kube: client}, ns, o)
	})
}

// allPages lists a page at a time, so that a namespace with thousands of objects never needs
// one huge response (ConfigMaps and Secrets can be up to 1 MiB each).
func allPages[T any](ctx context.Context, what string, list func(metav1.ListOptions) ([]T, string, error)) ([]T, error) {
	var out []T
	opts := metav1.ListOptions{Limit: listPage}
	for {
		page, next, err := list(opts)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", what, err)
		}
		out = append(out, page...)
		if next == "" || ctx.Err() != nil {
			return out, ctx.Err()
		}
		opts.Continue = next
	}
}

// listPage is the size of one LIST page.
const listPage = 500

// removeFinalizer drops Wave's finalizer with a JSON patch that first tests the list it read,
// so a concurrent change of the finalizers makes it read again instead of overwriting.
func removeFinalizer(ctx context.Context, client kubernetes.Interface, w workload.Workload, dryRun bool) error {
	klog.InfoS("removing Wave's finalizer", "workload", w.String(), "dryRun", dryRun)
	if dryRun {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh, err := getWorkload(ctx, client, w.Kind, w.Meta.Namespace, w.Meta.Name)
		if err != nil {
			return err
		}
		kept := slices.DeleteFunc(slices.Clone(fresh.Meta.Finalizers), func(f string) bool { return f == refs.WaveFinalizer })
		if len(kept) == len(fresh.Meta.Finalizers) {
			return nil
		}
		body := fmt.Appendf(nil, `{"metadata":{"finalizers":%s,"resourceVersion":%q}}`, jsonList(kept), fresh.Meta.ResourceVersion)
		if err := workload.Patch(ctx, workload.Clients{Kube: client}, w.Kind, w.Meta.Namespace, w.Meta.Name, body); err != nil {
			return fmt.Errorf("%s: remove finalizer %s: %w", w, refs.WaveFinalizer, err)
		}
		return nil
	})
}

func getWorkload(ctx context.Context, client kubernetes.Interface, kind workload.Kind, ns, name string) (workload.Workload, error) {
	t, err := workload.TypeOf(kind)
	if err != nil {
		return workload.Workload{}, err
	}
	return t.Get(ctx, workload.Clients{Kube: client}, ns, name)
}

func jsonList(s []string) string {
	b, _ := json.Marshal(append([]string{}, s...)) // never null
	return string(b)
}

func isWaveOwnerRef(r metav1.OwnerReference, owned map[types.UID]string) bool {
	_, ok := owned[r.UID]
	return ok && r.APIVersion == "apps/v1" && slices.Contains([]string{"Deployment", "StatefulSet", "DaemonSet"}, r.Kind)
}

func removeOwnerRefs(ctx context.Context, client kubernetes.Interface, ns string, owned map[types.UID]string, dryRun bool) (int, error) {
	if len(owned) == 0 {
		return 0, nil
	}
	cms, err := allPages(ctx, "configmaps", func(o metav1.ListOptions) ([]corev1.ConfigMap, string, error) {
		l, err := client.CoreV1().ConfigMaps(ns).List(ctx, o)
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.Continue, nil
	})
	if err != nil {
		return 0, err
	}
	secrets, err := allPages(ctx, "secrets", func(o metav1.ListOptions) ([]corev1.Secret, string, error) {
		l, err := client.CoreV1().Secrets(ns).List(ctx, o)
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.Continue, nil
	})
	if err != nil {
		return 0, err
	}
	// One way to fix both kinds: read fresh, drop Wave's references, update at that version.
	type fixer struct {
		ref refs.ObjectRef
		fix func() error
	}
	var todo []fixer
	for _, cm := range cms {
		if hasWaveOwnerRef(cm.OwnerReferences, owned) {
			todo = append(todo, fixer{refs.ObjectRef{Kind: refs.ConfigMap, Namespace: cm.Namespace, Name: cm.Name}, func() error {
				fresh, err := client.CoreV1().ConfigMaps(cm.Namespace).Get(ctx, cm.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				fresh.OwnerReferences = dropWaveOwnerRefs(fresh.OwnerReferences, owned)
				_, err = client.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, fresh, metav1.UpdateOptions{FieldManager: "configwave-wave-migrate"})
				return err
			}})
		}
	}
	for _, s := range secrets {
		if hasWaveOwnerRef(s.OwnerReferences, owned) {
			todo = append(todo, fixer{refs.ObjectRef{Kind: refs.Secret, Namespace: s.Namespace, Name: s.Name}, func() error {
				fresh, err := client.CoreV1().Secrets(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				fresh.OwnerReferences = dropWaveOwnerRefs(fresh.OwnerReferences, owned)
				_, err = client.CoreV1().Secrets(s.Namespace).Update(ctx, fresh, metav1.UpdateOptions{FieldManager: "configwave-wave-migrate"})
				return err
			}})
		}
	}
	for i, f := range todo {
		klog.InfoS("removing Wave's owner references", "object", f.ref.String(), "dryRun", dryRun)
		if dryRun {
			continue
		}
		if err := retry.RetryOnConflict(retry.DefaultRetry, f.fix); err != nil {
			return i, fmt.Errorf("%s: remove Wave's owner references: %w", f.ref, err)
		}
	}
	return len(todo), nil
}

func hasWaveOwnerRef(refs []metav1.OwnerReference, owned map[types.UID]string) bool {
	return slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return isWaveOwnerRef(r, owned) })
}

func dropWaveOwnerRefs(refs []metav1.OwnerReference, owned map[types.UID]string) []metav1.OwnerReference {
	return slices.DeleteFunc(refs, func(r metav1.OwnerReference) bool { return isWaveOwnerRef(r, owned) })
}
