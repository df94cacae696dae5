package rollout

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/compactindex"
	"github.com/configwave/configwave/internal/wave/configdata"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/csi"
	"github.com/configwave/configwave/internal/wave/digeststore"
	"github.com/configwave/configwave/internal/wave/informer"
	"github.com/configwave/configwave/internal/wave/pollwatch"
	"github.com/configwave/configwave/internal/wave/waveclient"
	"github.com/configwave/configwave/internal/wave/workload"
)

// Informers are the caches the controller reads: the workload kinds (narrowed by a label
// selector) and ConfigMaps and Secrets reduced to key digests, in every watched
// namespace (one informer of each per namespace, or one for the whole cluster).
type Informers struct {
	workloads map[workload.Kind][]informer.Informer
	configs   map[configref.Kind][]informer.Informer
	digests   []*digeststore.Store // the ConfigMap and Secret informers' stores
	// all are every informer, to start: those above, and the namespaces' and the CSI
	// driver's.
	all      []informer.Informer
	watched  map[string]bool // namespaces; metav1.NamespaceAll for every one
	digester confighash.Digester
	whole    *configdata.Store // the data of the objects workloads use
	// namespaces: only with WatchNamespaces (--namespace-selector), for their labels.
	namespaces cache.SharedIndexInformer
	// csi: only with WatchSecretProviderClasses (--enable-csi-integration).
	csi         *csi.Tracker
	csiSynced   []cache.InformerSynced
	csiStatuses []cache.SharedIndexInformer
	// writers: only with WatchSecretWriters (their kinds served, and wave may read them).
	writers []cache.SharedIndexInformer
	// poker makes the informers of the kinds wave may list but not watch list again on every
	// config change.
	poker *pollwatch.Poker
	runs  sync.WaitGroup
}

// WatchNamespaces adds an informer on namespaces, whose labels --namespace-selector reads, and
// whose configwave.io/rollout-window gives their workloads' windows. Call it before Start.
func (inf *Informers) WatchNamespaces(client waveclient.Interface) {
	inf.namespaces = informer.New[*corev1.NamespaceList](client.CoreV1().Namespaces(), client, &corev1.Namespace{}, informer.Options{Indexers: informer.NamespaceIndex()})
	inf.all = append(inf.all, inf.namespaces)
}

// namespaceAnnotations are a namespace's annotations; nil when namespaces are not watched or it
// is gone.
func (inf *Informers) namespaceAnnotations(name string) map[string]string {
	if inf == nil || inf.namespaces == nil {
		return nil
	}
	if obj, ok, err := inf.namespaces.GetIndexer().GetByKey(name); err == nil && ok {
		return obj.(metav1.Object).GetAnnotations()
	}
	return nil
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
	inf := &Informers{workloads: map[workload.Kind][]informer.Informer{}, configs: map[configref.Kind][]informer.Informer{}, watched: map[string]bool{}, whole: configdata.New()}
	dg.Whole = inf.whole.Offer
	inf.digester = dg
	for _, ns := range namespaces {
		inf.watched[ns] = true
		tweak := func(o *metav1.ListOptions) {
			if workloadSelector != nil && !workloadSelector.Empty() {
				o.LabelSelector = workloadSelector.String()
			}
		}
		for _, t := range kinds {
			switch access(t.Kind(), ns) {
			case workload.Skipped:
				continue
			case workload.Listed:
				if inf.poker == nil {
					inf.poker = pollwatch.NewPoker()
				}
				inf.workloads[t.Kind()] = append(inf.workloads[t.Kind()], t.PolledInformer(clients, ns, tweak, inf.poker, resync))
			default:
				inf.workloads[t.Kind()] = append(inf.workloads[t.Kind()], t.Informer(clients, ns, tweak, resync))
			}
		}
		// Config objects never need a resync: a workload resync reads them from the cache.
		// Plain informers: their handlers only queue, and a shared informer's buffers would
		// keep the size of the initial list's backlog for good. Their stores keep compact
		// records: at 100,000 objects, client-go's would cost 12 MB more.
		cms, secrets := digeststore.New(), digeststore.New()
		inf.digests = append(inf.digests, cms, secrets)
		inf.configs[configref.ConfigMap] = append(inf.configs[configref.ConfigMap],
			informer.NewPlain[*corev1.ConfigMapList](client.CoreV1().ConfigMaps(ns), client, &corev1.ConfigMap{}, informer.Options{Store: cms, Transform: dg.Transform}))
		inf.configs[configref.Secret] = append(inf.configs[configref.Secret],
			informer.NewPlain[*corev1.SecretList](client.CoreV1().Secrets(ns), client, &corev1.Secret{}, informer.Options{Store: secrets, Transform: dg.Transform}))
	}
	for _, list := range inf.workloads {
		inf.all = append(inf.all, list...)
	}
	for _, list := range inf.configs {
		inf.all = append(inf.all, list...)
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

// Relist makes the informers of the kinds wave may list but not watch list again soon (nothing
// when every kind is watched).
func (inf *Informers) Relist() {
	if inf != nil && inf.poker != nil {
		inf.poker.Poke()
	}
}

// Watches reports whether the caches cover namespace: anything outside them reads as absent.
func (inf *Informers) Watches(namespace string) bool {
	return inf.watched[metav1.NamespaceAll] || inf.watched[namespace]
}

// Start runs the informers until ctx ends.
func (inf *Informers) Start(ctx context.Context) {
	for _, i := range inf.all {
		inf.runs.Add(1)
		go func() { defer inf.runs.Done(); i.RunWithContext(ctx) }()
	}
}

// Compact gathers what the caches keep whole away from the heap the initial lists left; call
// it once, when they synced.
func (inf *Informers) Compact() {
	inf.whole.Repack()
	for _, s := range inf.digests {
		s.Repack()
	}
	for _, list := range inf.workloads {
		for _, i := range list {
			if s, ok := i.GetIndexer().(*compactindex.Indexer); ok {
				s.Repack(workload.Pack)
			}
		}
	}
}

// Shutdown waits for the informers' goroutines after ctx ended.
func (inf *Informers) Shutdown() {
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
	for _, i := range inf.writers {
		out = append(out, i.HasSynced)
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

func getByKey[I informer.Informer](list []I, key string) (any, bool) {
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

// Incomplete says why a source's content in the cache is not one a pod can start on
// (sourceready), or "".
func (inf *Informers) Incomplete(ref configref.Ref) string {
	if ref.Kind != configref.Secret {
		return ""
	}
	var why []string
	if d, ok := inf.config(ref); ok {
		if d, ok := d.(*confighash.Digested); ok && d.Incomplete() != "" {
			why = append(why, d.Incomplete())
		}
	}
	if w := inf.writersNotDone(ref); w != "" {
		why = append(why, w)
	}
	return strings.Join(why, "; and ")
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
