package rollout

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/configwave/configwave/internal/confighash"
	"github.com/configwave/configwave/internal/configref"
	"github.com/configwave/configwave/internal/csi"
	"github.com/configwave/configwave/internal/listpoll"
	"github.com/configwave/configwave/internal/wholeobj"
	"github.com/configwave/configwave/internal/workload"
)

// Informers are the caches the controller reads: the workload kinds (narrowed by a label
// selector) and ConfigMaps and Secrets reduced to key digests, in every watched
// namespace (one factory per namespace, or one for the whole cluster).
type Informers struct {
	workloads map[workload.Kind][]cache.SharedIndexInformer
	configs   map[configref.Kind][]cache.SharedIndexInformer
	factories []informers.SharedInformerFactory
	dynamic   []dynamicinformer.DynamicSharedInformerFactory // custom kinds'; empty without any
	watched   map[string]bool                                // namespaces; metav1.NamespaceAll for every one
	digester  confighash.Digester
	whole     *wholeobj.Store // the data of the objects workloads use
	// namespaces: only with WatchNamespaces (--namespace-selector), for their labels.
	namespaces cache.SharedIndexInformer
	// csi: only with WatchSecretProviderClasses (--enable-csi-integration).
	csi         *csi.Tracker
	csiSynced   []cache.InformerSynced
	csiStatuses []cache.SharedIndexInformer
	// polled: the informers of the kinds wave may list but not watch, started apart from the
	// factories; poker makes them list again on every config change.
	polled []cache.SharedIndexInformer
	poker  *listpoll.Poker
	runs   sync.WaitGroup
}

// WatchNamespaces adds an informer on namespaces, whose labels --namespace-selector reads.
// Call it before Start.
func (inf *Informers) WatchNamespaces(client kubernetes.Interface) {
	f := informers.NewSharedInformerFactory(client, 0)
	inf.namespaces = f.Core().V1().Namespaces().Informer()
	inf.factories = append(inf.factories, f)
}

// namespaceLabels are a namespace's labels; nil when namespaces are not watched or it is gone.
func (inf *Informers) namespaceLabels(name string) map[string]string {
	if inf.namespaces == nil {
		return nil
	}
	if obj, ok, err := inf.namespaces.GetIndexer().GetByKey(name); err == nil && ok {
		return obj.(metav1.Object).GetLabels()
	}
	return nil
}

// NewInformers prepares the informers of kinds (workload.Served); namespaces empty means every
// namespace. The digester reduces config objects as they arrive.
func NewInformers(clients workload.Clients, kinds []workload.Type, namespaces []string, workloadSelector labels.Selector, resync time.Duration, dg confighash.Digester) *Informers {
	return NewInformersWithAccess(clients, kinds, namespaces, workloadSelector, resync, dg, nil)
}

// AccessFunc says how a kind is followed in a namespace (metav1.NamespaceAll for every one).
type AccessFunc func(kind workload.Kind, namespace string) workload.Access

// NewInformersWithAccess is NewInformers under RBAC that may not let wave watch, or even list,
// every kind: access says, per kind and namespace, whether an informer watches it, lists it
// on every config change, or does not follow it. nil: every kind is watched.
func NewInformersWithAccess(clients workload.Clients, kinds []workload.Type, namespaces []string, workloadSelector labels.Selector, resync time.Duration, dg confighash.Digester, access AccessFunc) *Informers {
	if access == nil {
		access = func(workload.Kind, string) workload.Access { return workload.Watched }
	}
	client := clients.Kube
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	inf := &Informers{workloads: map[workload.Kind][]cache.SharedIndexInformer{}, configs: map[configref.Kind][]cache.SharedIndexInformer{}, watched: map[string]bool{}, whole: wholeobj.New()}
	dg.Whole = inf.whole.Offer
	inf.digester = dg
	for _, ns := range namespaces {
		inf.watched[ns] = true
		tweak := func(o *metav1.ListOptions) {
			if workloadSelector != nil && !workloadSelector.Empty() {
				o.LabelSelector = workloadSelector.String()
			}
		}
		wf := workload.Factories{Typed: informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithNamespace(ns), informers.WithTweakListOptions(tweak), informers.WithTransform(workload.Trim))}
		if clients.Dynamic != nil {
			wf.Dynamic = dynamicinformer.NewFilteredDynamicSharedInformerFactory(clients.Dynamic, resync, ns, tweak)
			inf.dynamic = append(inf.dynamic, wf.Dynamic)
		}
		// Config objects never need a resync: a workload resync reads them from the cache.
		cf := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns), informers.WithTransform(dg.Transform))
		for _, t := range kinds {
			switch access(t.Kind(), ns) {
			case workload.Skipped:
				continue
			case workload.Listed:
				if inf.poker == nil {
					inf.poker = listpoll.NewPoker()
				}
				i := t.PolledInformer(clients, ns, tweak, inf.poker, resync)
				inf.polled = append(inf.polled, i)
				inf.workloads[t.Kind()] = append(inf.workloads[t.Kind()], i)
			default:
				inf.workloads[t.Kind()] = append(inf.workloads[t.Kind()], t.Informer(wf))
			}
		}
		inf.configs[configref.ConfigMap] = append(inf.configs[configref.ConfigMap], cf.InformerFor(&corev1.ConfigMap{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewConfigMapInformer(c, ns, resync, configIndexers(ns))
		}))
		inf.configs[configref.Secret] = append(inf.configs[configref.Secret], cf.InformerFor(&corev1.Secret{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewSecretInformer(c, ns, resync, configIndexers(ns))
		}))
		inf.factories = append(inf.factories, wf.Typed, cf)
	}
	if inf.poker != nil {
		// A config change may concern a workload the caches cannot watch: they list again.
		poke := cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { inf.poker.Poke() },
			UpdateFunc: func(any, any) { inf.poker.Poke() },
			DeleteFunc: func(any) { inf.poker.Poke() },
		}
		for _, list := range inf.configs {
			for _, i := range list {
				_, _ = i.AddEventHandler(poke)
			}
		}
	}
	return inf
}

// configIndexers: an informer of one namespace needs no namespace index, which with 100,000
// objects costs megabytes; configNames reads its keys instead.
func configIndexers(namespace string) cache.Indexers {
	if namespace == metav1.NamespaceAll {
		return cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	}
	return cache.Indexers{}
}

// Watches reports whether the caches cover namespace: anything outside them reads as absent.
func (inf *Informers) Watches(namespace string) bool {
	return inf.watched[metav1.NamespaceAll] || inf.watched[namespace]
}

// Start runs the informers until ctx ends.
func (inf *Informers) Start(ctx context.Context) {
	for _, f := range inf.factories {
		f.Start(ctx.Done())
	}
	for _, f := range inf.dynamic {
		f.Start(ctx.Done())
	}
	for _, i := range inf.polled {
		inf.runs.Add(1)
		go func() { defer inf.runs.Done(); i.Run(ctx.Done()) }()
	}
}

// Compact gathers what the caches keep whole away from the heap the initial lists left; call
// it once, when they synced.
func (inf *Informers) Compact() { inf.whole.Repack() }

// Shutdown waits for the informers' goroutines after ctx ended.
func (inf *Informers) Shutdown() {
	for _, f := range inf.factories {
		f.Shutdown()
	}
	for _, f := range inf.dynamic {
		f.Shutdown()
	}
	inf.runs.Wait()
}

// Synced lists every informer's HasSynced.
func (inf *Informers) Synced() []cache.InformerSynced {
	var out []cache.InformerSynced
	for _, list := range inf.workloads {
		for _, i := range list {
			out = append(out, i.HasSynced)
		}
	}
	for _, list := range inf.configs {
		for _, i := range list {
			out = append(out, i.HasSynced)
		}
	}
	if inf.namespaces != nil {
		out = append(out, inf.namespaces.HasSynced)
	}
	return append(out, inf.csiSynced...)
}

// HasSynced reports whether every informer has listed once.
func (inf *Informers) HasSynced() bool {
	for _, s := range inf.Synced() {
		if !s() {
			return false
		}
	}
	return true
}

func getByKey(list []cache.SharedIndexInformer, key string) (any, bool) {
	for _, i := range list {
		if obj, ok, err := i.GetIndexer().GetByKey(key); err == nil && ok {
			return obj, true
		}
	}
	return nil, false
}

// Workload returns a workload from the cache.
func (inf *Informers) Workload(kind workload.Kind, namespace, name string) (workload.Workload, bool) {
	obj, ok := getByKey(inf.workloads[kind], namespace+"/"+name)
	if !ok {
		return workload.Workload{}, false
	}
	return workload.Of(obj)
}

// config returns a digested ConfigMap or Secret from the cache.
func (inf *Informers) config(ref configref.Ref) (any, bool) {
	return getByKey(inf.configs[ref.Kind], ref.Namespace+"/"+ref.Name)
}

// Digests is a DigestsFunc over the caches.
func (inf *Informers) Digests(ref configref.Ref) (map[string]string, bool) {
	if ref.Kind == configref.SecretProviderClass {
		return inf.secretProviderClassDigests(ref)
	}
	obj, ok := inf.config(ref)
	if !ok {
		return nil, false
	}
	return confighash.KeyDigests(obj), true
}
