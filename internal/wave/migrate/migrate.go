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
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/waveclient"
	"github.com/configwave/configwave/internal/wave/workload"
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
func FromWaveV05(ctx context.Context, client waveclient.Interface, namespaces []string, dryRun bool) (Report, error) {
	var rep Report
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, ns := range namespaces {
		waveOwned := map[types.UID]owner{}
		var finalized []workload.Workload
		for _, t := range workload.WaveTypes() {
			items, err := listWorkloads(ctx, client, t, ns)
			if err != nil {
				return rep, err
			}
			for _, w := range items {
				if !w.OptedIn() && !slices.Contains(w.Meta.Finalizers, podrefs.WaveFinalizer) {
					continue
				}
				waveOwned[w.Meta.UID] = owner{kind: string(w.Kind), name: w.Meta.Name}
				if slices.Contains(w.Meta.Finalizers, podrefs.WaveFinalizer) {
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

// owner is a workload Wave managed: what its owner references named.
type owner struct{ kind, name string }

// listWorkloads lists every workload of type t in ns.
func listWorkloads(ctx context.Context, client waveclient.Interface, t workload.Type, ns string) ([]workload.Workload, error) {
	var out []workload.Workload
	err := eachPage(ctx, strings.ToLower(string(t.Kind()))+"s", listPage, func(o metav1.ListOptions) ([]workload.Workload, string, error) {
		return t.List(ctx, workload.Clients{Kube: client}, ns, o)
	}, func(page []workload.Workload) error {
		out = append(out, page...)
		return nil
	})
	return out, err
}

// eachPage lists a page at a time and hands each to do before the next is read, so that a
// namespace with thousands of objects is never held whole (ConfigMaps and Secrets can be up
// to 1 MiB each).
func eachPage[T any](ctx context.Context, what string, size int64, list func(metav1.ListOptions) ([]T, string, error), do func([]T) error) error {
	opts := metav1.ListOptions{Limit: size}
	for {
		page, next, err := list(opts)
		if err != nil {
			return fmt.Errorf("list %s: %w", what, err)
		}
		if err := do(page); err != nil {
			return err
		}
		if next == "" || ctx.Err() != nil {
			return ctx.Err()
		}
		opts.Continue = next
	}
}

// The size of one LIST page: of workloads, and of ConfigMaps and Secrets (up to 1 MiB each).
const (
	listPage       = 500
	configListPage = 100
)

// removeFinalizer drops Wave's finalizer with a merge patch that carries the resourceVersion
// it read, so a concurrent change of the finalizers is a conflict, read again, instead of
// being overwritten.
func removeFinalizer(ctx context.Context, client waveclient.Interface, w workload.Workload, dryRun bool) error {
	klog.InfoS("removing Wave's finalizer", "workload", w.String(), "dryRun", dryRun)
	if dryRun {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh, err := getWorkload(ctx, client, w.Kind, w.Meta.Namespace, w.Meta.Name)
		if err != nil {
			return err
		}
		kept := slices.DeleteFunc(slices.Clone(fresh.Meta.Finalizers), func(f string) bool { return f == podrefs.WaveFinalizer })
		if len(kept) == len(fresh.Meta.Finalizers) {
			return nil
		}
		body := fmt.Appendf(nil, `{"metadata":{"finalizers":%s,"resourceVersion":%q}}`, jsonList(kept), fresh.Meta.ResourceVersion)
		if err := workload.Patch(ctx, workload.Clients{Kube: client}, w.Kind, w.Meta.Namespace, w.Meta.Name, body); err != nil {
			return fmt.Errorf("%s: remove finalizer %s: %w", w, podrefs.WaveFinalizer, err)
		}
		return nil
	})
}

func getWorkload(ctx context.Context, client waveclient.Interface, kind workload.Kind, ns, name string) (workload.Workload, error) {
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

// isWaveOwnerRef: a reference exactly as Wave up to 0.6 wrote it (getOwnerReference: apps/v1,
// the workload's kind, name and UID, blockOwnerDeletion true, controller false). One that a
// person or another tool set to the same workload differs, and stays.
func isWaveOwnerRef(r metav1.OwnerReference, owned map[types.UID]owner) bool {
	o, ok := owned[r.UID]
	return ok && r.APIVersion == "apps/v1" && r.Kind == o.kind && r.Name == o.name &&
		r.Controller != nil && !*r.Controller && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion
}

// removeOwnerRefs removes Wave's owner references from the ConfigMaps and Secrets of ns, a
// page at a time; it returns how many objects it fixed.
func removeOwnerRefs(ctx context.Context, client waveclient.Interface, ns string, owned map[types.UID]owner, dryRun bool) (int, error) {
	if len(owned) == 0 {
		return 0, nil
	}
	m := ownerRefRemover{owned: owned, dryRun: dryRun}
	err := removeFrom(ctx, &m, configref.ConfigMap, client.CoreV1().ConfigMaps(ns), func(l *corev1.ConfigMapList) ([]corev1.ConfigMap, string) { return l.Items, l.Continue })
	if err == nil {
		err = removeFrom(ctx, &m, configref.Secret, client.CoreV1().Secrets(ns), func(l *corev1.SecretList) ([]corev1.Secret, string) { return l.Items, l.Continue })
	}
	return m.fixed, err
}

type ownerRefRemover struct {
	owned  map[types.UID]owner
	dryRun bool
	fixed  int
}

// configClient is what removeFrom needs of the typed client of ConfigMaps or of Secrets.
type configClient[T any, L any] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// removeFrom fixes the objects of one kind, a page at a time: each read fresh, Wave's
// references dropped, updated at the version read, again on conflict.
func removeFrom[O any, T interface {
	*O
	metav1.Object
}, L any](ctx context.Context, m *ownerRefRemover, kind configref.Kind, c configClient[T, L], items func(L) ([]O, string)) error {
	return eachPage(ctx, kind.Resource(), configListPage, func(o metav1.ListOptions) ([]O, string, error) {
		l, err := c.List(ctx, o)
		if err != nil {
			return nil, "", err
		}
		page, next := items(l)
		return page, next, nil
	}, func(page []O) error {
		for i := range page {
			obj := T(&page[i])
			if !hasWaveOwnerRef(obj.GetOwnerReferences(), m.owned) {
				continue
			}
			ref := configref.Ref{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
			klog.InfoS("removing Wave's owner references", "object", ref.String(), "dryRun", m.dryRun)
			if !m.dryRun {
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					fresh, err := c.Get(ctx, ref.Name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					fresh.SetOwnerReferences(dropWaveOwnerRefs(fresh.GetOwnerReferences(), m.owned))
					_, err = c.Update(ctx, fresh, metav1.UpdateOptions{FieldManager: "configwave-wave-migrate"})
					return err
				})
				if err != nil {
					return fmt.Errorf("%s: remove Wave's owner references: %w", ref, err)
				}
			}
			m.fixed++
		}
		return nil
	})
}

func hasWaveOwnerRef(refs []metav1.OwnerReference, owned map[types.UID]owner) bool {
	return slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return isWaveOwnerRef(r, owned) })
}

func dropWaveOwnerRefs(refs []metav1.OwnerReference, owned map[types.UID]owner) []metav1.OwnerReference {
	return slices.DeleteFunc(refs, func(r metav1.OwnerReference) bool { return isWaveOwnerRef(r, owned) })
}
