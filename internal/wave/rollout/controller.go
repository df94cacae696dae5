// Package rollout owns wave's controller: the caches (informers.go) with the reverse index
// from config to workloads as an informer indexer, the work queue, and the reconcile that
// gathers a situation from the caches (gather.go), decides with the pure plan (plan.go) and
// writes (apply.go). What a template references is package refs; Wave's hash and our digests
// are package confighash; the workload kinds are package workload; the whole objects kept for
// Wave's hash are package wholeobj; what holds a rollout back is package pacing; crash loops
// are package crashloop; which rollouts are followed, and what to report of them, is package
// follow; the migration from Wave 0.6 and earlier is package migrate.
//
//	inf := rollout.NewInformers(clients, kinds, namespaces, labels.Everything(), 5*time.Minute, confighash.Digester{Key: installKey})
//	c, err := rollout.NewController(rollout.Config{Client: clients.Kube, Informers: inf, Recorder: rec, Metrics: m})
//	inf.Start(ctx); err = c.Run(ctx, 4)
//
// The reconcile is level-triggered, in the shape of kubernetes/sample-controller: events only
// say which workload to look at; sync reads the workload and the digests of its config from
// the caches and decides from them alone.
package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/brake"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/crashloop"
	"github.com/configwave/configwave/internal/wave/pacing"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/rolloutwatch"
	"github.com/configwave/configwave/internal/wave/waveclient"
	"github.com/configwave/configwave/internal/wave/window"
	"github.com/configwave/configwave/internal/wave/workload"
)

// Annotations of our own. On the workload's metadata a change rolls nothing, which is what
// makes baselines and restarts free.
const (
	// InputsAnnotation (workload metadata) records the digests of the config the pods run.
	InputsAnnotation = "configwave.io/config-inputs"
	// InputsHashAnnotation (pod template) changes with every rollout we cause, so that a change
	// Wave's formula does not cover (an init container's env) still rolls the pods.
	InputsHashAnnotation = "configwave.io/config-inputs-hash"
)

// Config wires a Controller.
type Config struct {
	Client    waveclient.Interface
	Dynamic   dynamic.Interface // custom workload kinds (Argo Rollouts); nil where none is served
	Informers *Informers
	Recorder  record.EventRecorder
	Metrics   *Metrics
	Format    confighash.HashFormat // default HashWave
	HashKey   []byte                // HMAC key for the config hash (--hash-key-file)
	// DigestKey keys the digests of the inputs record (the install key, or HashKey when that
	// is set); the Informers' Digester must use it too. Default HashKey. Without either, the
	// records name the Digester's mode: Secrets digested by their metadata (its
	// SecretsByMetadata), or plain digests.
	DigestKey []byte
	DryRun    bool // decide, log and emit Events; write nothing
	// Passive keeps the indexes (for the gauges) and queues nothing, keeps no whole object:
	// Stakater Reloader's --webhook-url mode, where nothing rolls and Run is never called.
	Passive bool
	// AllowCrossNamespaceRefs lets extra-* entries name other namespaces (Wave's behaviour).
	AllowCrossNamespaceRefs bool
	// Dialects are the annotation dialects read (--annotations); zero: Wave's and Reloader's.
	Dialects Dialects
	// Reloader holds Stakater Reloader's flags that narrow what rolls.
	Reloader StakaterOptions
	// Coalesce holds a rollout this long after the first change of a quiet workload, so
	// that changes arriving together roll once (--coalesce); 0 rolls at once.
	Coalesce time.Duration
	// MinRolloutInterval is the floor between two rollouts of one workload (raised per
	// workload by its annotation, or Reloader's pause-period); 0 none.
	MinRolloutInterval time.Duration
	// RolloutWindow is when a rollout may start, for a workload without its own
	// configwave.io/rollout-window (--rollout-window); always when empty.
	RolloutWindow window.Windows
	// SourceReadyTimeout is how long a rollout waits for a source it follows whose content is
	// incomplete (sourceready: a half-written TLS pair) before it rolls all the same
	// (--source-ready-timeout); 0 never waits.
	SourceReadyTimeout time.Duration
	// Flapping is when a source that changes too often stops rolling the workloads that use it
	// (--flapping-threshold); the zero Rule never brakes.
	Flapping brake.Rule
	// InFlight caps the rollouts under way at once (--max-rollouts-in-flight, per namespace
	// --max-rollouts-in-flight-per-namespace); zero none.
	InFlight pacing.InFlight
	// UpdateRate caps rollouts per second across all workloads, with bursts of UpdateBurst
	// (--update-rate, --update-burst, Wave's names); 0 none.
	UpdateRate  float64
	UpdateBurst int
	// RolloutDeadline: a StatefulSet or DaemonSet rollout not complete after this long counts
	// as failed (a Deployment's own progressDeadlineSeconds decides for it); 0 never.
	RolloutDeadline time.Duration
	// PodClient, when set, reads the pods of workloads under a config rollout, so that new
	// pods crash-looping fail the rollout at once (give it a rate limit of its own).
	PodClient waveclient.Interface
	// Revisions turns revisions on for every opted-in workload whose configwave.io/revisions
	// does not say "false" (--config-revisions).
	Revisions bool
	// LivePodsEvery, when set, has the leader look that often (and once its caches synced) for
	// pods of a revision that read a source live because wave's webhook did not answer when
	// they were made, and say so once per pod (ConfigRevisionLive). Set it where wave serves
	// the webhook: without it every such pod reads live by design.
	LivePodsEvery time.Duration
	// Adopt, when set, makes the index and snapshots of a revision live as long as the revision
	// object (revisionhook.Adopter.Add): wave asks it once per revision, so that a revision
	// with no pod, or whose pods the webhook missed, does not keep them for ever.
	Adopt func(namespace string, owner revisions.Owner, revision string, objects []configref.Ref) bool
	// Unadopt, beside Adopt, forgets what Adopt did for objects made again (a repair).
	Unadopt func(objects []configref.Ref)
	// Alert, when set, receives one line of text for each failed config rollout and each
	// recovery (--notify-webhook). It names workloads and objects, never a value.
	Alert func(text string)
}

// clients are what the workload kinds write through.
func (c *Controller) clients() workload.Clients {
	return workload.Clients{Kube: c.Client, Dynamic: c.Dynamic}
}

// Controller keeps opted-in workloads' config hash current.
type Controller struct {
	Config
	live   livePods
	keyID  string // names DigestKey in the inputs records, or confighash.MetaID
	queue  workqueue.TypedRateLimitingInterface[string]
	full   *fullObjects
	follow *rolloutwatch.Tracker
	crash  *crashloop.Finder // nil without a PodClient
	pace   *pacing.Pacer
	warned warnedOf
	// heldBack remembers, per workload, the template hash a rollback holds it at, once the
	// ConfigRolledBack Event for it is sent.
	heldBack warnedOf
	// earlier: per workload, whether its template with no revision is one of its earlier
	// revisions (an undo's), for the generation it was asked for.
	earlier earlierAnswers
	// adopted: per workload, the revision whose snapshots wave gave to its revision object.
	adopted adoptedRevisions
	// repairs: per workload, the revision whose snapshots were made again last (Repair).
	repairs repairsTried
	// approvals: since when each workload's change waits for approval (configwave.io/approval).
	approvals approvalsPending
	// brake: the sources that change too often (--flapping-threshold); brakeSaid, per workload,
	// the braked sources its last ConfigFlapping Event named.
	brake     *brake.Tracker
	brakeSaid warnedOf
	// flight: the rollouts waiting under the in-flight cap, and those admitted but not yet
	// followed as rolling; primed: the rollouts under way at start are counted.
	flight  flight
	primed  atomic.Bool
	pending *changesPending
	leading atomic.Bool // Run is running: this replica decides
	// indexMemo: the index values of the last cache entries indexed (see indexes.go).
	indexMemo indexMemo
}

// NewController registers the event handlers on the informers.
func NewController(cfg Config) (*Controller, error) {
	if cfg.Format == "" {
		cfg.Format = confighash.HashWave
	}
	c := &Controller{
		Config: cfg,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "wave"}),
	}
	if c.DigestKey == nil {
		c.DigestKey = c.HashKey
	}
	c.keyID = confighash.KeyID(c.DigestKey)
	if c.keyID == "" && cfg.Informers.digester.SecretsByMetadata {
		// Named from the Digester itself: a record that said so of plain digests of Secrets
		// would hide an oracle.
		c.keyID = confighash.MetaID
	}
	c.full = newFullObjects(cfg.Client, cfg.Informers)
	c.follow = rolloutwatch.New()
	c.pending = newChangesPending()
	c.pace = pacing.New(cfg.Coalesce, cfg.MinRolloutInterval, cfg.Reloader.Dialect.PausePeriod())
	c.pace.LimitRate(cfg.UpdateRate, cfg.UpdateBurst)
	c.brake = brake.NewTracker(cfg.Flapping)
	if cfg.PodClient != nil {
		lookup := func(key string) (workload.Workload, bool) {
			kind, ns, name, err := workload.SplitKey(key)
			if err != nil {
				return workload.Workload{}, false
			}
			return cfg.Informers.Workload(kind, ns, name)
		}
		c.crash = crashloop.New(cfg.PodClient, lookup, InputsHashAnnotation, func(key string) { c.queue.Add(key) })
	}
	if err := c.watchWorkloads(); err != nil {
		return nil, err
	}
	if cfg.Passive {
		return c, nil
	}
	if err := c.watchNamespaces(); err != nil {
		return nil, err
	}
	cfg.Informers.whole.Wanted = c.used
	if cfg.Informers.csi != nil {
		cfg.Informers.csi.OnChange(c.enqueueRef)
	}
	if err := c.watchConfigs(); err != nil {
		return nil, err
	}
	if err := c.watchSecretWriters(); err != nil {
		return nil, err
	}
	return c, nil
}

// watchWorkloads indexes every workload informer by the config its workloads use and, unless
// passive, queues a workload on each of its events.
func (c *Controller) watchWorkloads() error {
	for kind, list := range c.Informers.workloads {
		for _, inf := range list {
			// The reverse index lives in the informers, kept current by client-go on every
			// replica: a standby that becomes the leader finds it complete.
			if err := inf.GetIndexer().AddIndexers(cache.Indexers{byConfig: c.configKeys, byOptIn: c.optInKey, byPattern: c.patternKey}); err != nil {
				return fmt.Errorf("index %s by the config they use: %w", kind, err)
			}
			if c.Passive {
				continue
			}
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    c.enqueueWorkload,
				UpdateFunc: func(_, obj any) { c.enqueueWorkload(obj) },
				DeleteFunc: func(obj any) { c.enqueueDeleted(kind, obj) },
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// watchNamespaces queues a namespace's workloads when its labels change: they decide for all of
// them (--namespace-selector).
func (c *Controller) watchNamespaces() error {
	if ns := c.Informers.namespaces; ns != nil {
		if _, err := ns.AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, obj any) {
				was, is := old.(metav1.Object), obj.(metav1.Object)
				if !maps.Equal(was.GetLabels(), is.GetLabels()) || was.GetAnnotations()[window.Annotation] != is.GetAnnotations()[window.Annotation] {
					c.enqueueNamespace(is.GetName()) // its selection, or its workloads' window
				}
			},
		}); err != nil {
			return err
		}
	}
	return nil
}

// watchConfigs queues the workloads that use a ConfigMap or Secret when it changes.
func (c *Controller) watchConfigs() error {
	for kind, list := range c.Informers.configs {
		for _, inf := range list {
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
				AddFunc: func(obj any, initialList bool) {
					// Every workload's own first add queues it, and workers start only once
					// all caches are synced: what the initial list brings tells them nothing
					// more. Skipping it spares a second and third reconcile of each workload
					// at start (100,000 objects, 10,000 workloads: 23,000 reconciles).
					if !initialList {
						if m, ok := metaOf(obj); ok {
							c.contentChanged(kind, m) // made again: a writer that deletes and creates
						}
						c.enqueueUsers(kind, obj)
					}
				},
				UpdateFunc: func(old, obj any) {
					// The digested objects keep only the metadata that decides what rolls (the
					// ignore and match annotations, labels for --resource-label-selector): any
					// other metadata-only update concerns nobody.
					o, ok1 := old.(*confighash.Digested)
					n, ok2 := obj.(*confighash.Digested)
					if ok1 && ok2 && !o.SameKeys(n) {
						c.contentChanged(kind, n)
					}
					if !ok1 || !ok2 || !o.SameKeys(n) ||
						!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) || !maps.Equal(o.GetLabels(), n.GetLabels()) {
						c.enqueueUsers(kind, obj)
					}
				},
				DeleteFunc: func(obj any) {
					if m, ok := metaOf(obj); ok {
						c.Informers.whole.Forget(configref.Ref{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()})
					}
					c.enqueueUsers(kind, obj)
				},
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Compact gathers what the first pass over every workload left for good (what is known of
// each) away from that pass's garbage; call it once, when the pass is over.
func (c *Controller) Compact() { c.follow.Compact() }

// Held is how many workloads have a rollout held back (--coalesce, a floor), for the gauge.
func (c *Controller) Held() float64 { return c.pace.Held() }

// Workloads is how many workloads this replica last judged to be in state s, for the gauge; a
// standby judges none.
func (c *Controller) Workloads(s rolloutrecord.State) float64 { return float64(c.follow.Count(s)) }

// QueueDepth and Tracked feed the gauges.
// HeldByRollback counts the workloads with revisions on that a rollback holds at an earlier
// config.
func (c *Controller) HeldByRollback() float64 { return float64(c.heldBack.count()) }

// PendingApproval counts the workloads whose config change waits for approval, and
// OldestPendingApproval is how long the oldest has waited, in seconds (0: none).
func (c *Controller) PendingApproval() float64 {
	n, _ := c.approvals.stats(time.Now())
	return float64(n)
}
func (c *Controller) OldestPendingApproval() float64 {
	_, oldest := c.approvals.stats(time.Now())
	return oldest.Seconds()
}

func (c *Controller) QueueDepth() float64 { return float64(c.queue.Len()) }
func (c *Controller) Tracked() float64 {
	n := 0
	for _, list := range c.Informers.workloads {
		for _, inf := range list {
			keys, _ := inf.GetIndexer().IndexKeys(byOptIn, "true")
			for _, k := range keys {
				if ns, _, _ := cache.SplitMetaNamespaceKey(k); c.namespaceSelected(ns) {
					n++
				}
			}
		}
	}
	return float64(n)
}

func (c *Controller) enqueueWorkload(obj any) {
	if key, ok := workload.KeyOf(obj); ok {
		c.queue.Add(key)
	}
}

func (c *Controller) enqueueDeleted(kind workload.Kind, obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		if ns, name, err := cache.SplitMetaNamespaceKey(tomb.Key); err == nil {
			c.queue.Add(workload.Key(kind, ns, name))
		}
		return
	}
	c.enqueueWorkload(obj)
}

// enqueueNamespace looks again at every workload of a namespace.
func (c *Controller) enqueueNamespace(namespace string) {
	for _, list := range c.Informers.workloads {
		for _, inf := range list {
			objs, _ := inf.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
			for _, obj := range objs {
				c.enqueueWorkload(obj)
			}
		}
	}
}

// contentChanged counts a change of a source's content for the brake, and says on the source
// when it brakes it.
func (c *Controller) contentChanged(kind configref.Kind, obj metav1.Object) {
	ref := configref.Ref{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if !c.used(ref) {
		return // a heartbeat or a lock no workload reads is none of the brake's business
	}
	if !c.brake.Changed(ref, time.Now()) || !c.leading.Load() {
		return
	}
	meta := metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, UID: obj.GetUID()}
	var about runtime.Object = &corev1.ConfigMap{ObjectMeta: meta}
	if kind == configref.Secret {
		about = &corev1.Secret{ObjectMeta: meta}
	}
	r := c.brake.Rule()
	c.Recorder.Eventf(about, corev1.EventTypeWarning, "ConfigFlapping",
		"%s changed %d times within %s (--flapping-threshold=%s): the workloads that use it do not roll for its changes until it is quiet for %s; configwave.io/rollout-now: \"true\" on a workload rolls it",
		ref.Kind.Lower()+"/"+ref.Name, r.Writes, r.Within, r, r.Within)
}

// SourcesBraked counts the sources that change too often to roll for, for the gauge.
func (c *Controller) SourcesBraked() float64 {
	if !c.leading.Load() {
		return 0 // a standby keeps counting, so that it brakes alike once it leads, but reports nothing
	}
	return float64(c.brake.Count(time.Now()))
}

func (c *Controller) enqueueUsers(kind configref.Kind, obj any) {
	if m, ok := metaOf(obj); ok {
		c.enqueueRef(configref.Ref{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()})
	}
}

// enqueueRef looks again at every workload that uses ref, or may (a reload list's regular
// expression).
func (c *Controller) enqueueRef(ref configref.Ref) {
	users := 0
	now, leading := time.Now(), c.leading.Load()
	enqueue := func(obj any) {
		if key, ok := workload.KeyOf(obj); ok {
			if leading {
				c.pending.note(key, now)
			}
			c.queue.Add(key)
		}
	}
	for _, list := range c.Informers.workloads {
		for _, inf := range list {
			objs, _ := inf.GetIndexer().ByIndex(byConfig, ref.String())
			for _, obj := range objs {
				enqueue(obj)
			}
			users += len(objs)
			patterned, _ := inf.GetIndexer().ByIndex(byPattern, ref.Namespace)
			for _, obj := range patterned {
				enqueue(obj)
			}
		}
	}
	klog.V(4).InfoS("config changed", "object", ref.String(), "users", users)
}

// metaOf is the object of a notification; a delete may come as a tombstone.
func metaOf(obj any) (metav1.Object, bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, ok := obj.(metav1.Object)
	return m, ok
}

// used reports whether an opted-in workload in a selected namespace uses ref (the byConfig
// index). One in a namespace selected later reads the whole object from the API once.
func (c *Controller) used(ref configref.Ref) bool {
	for _, list := range c.Informers.workloads {
		for _, inf := range list {
			keys, _ := inf.GetIndexer().IndexKeys(byConfig, ref.String())
			for _, k := range keys {
				if ns, _, _ := cache.SplitMetaNamespaceKey(k); c.namespaceSelected(ns) {
					return true
				}
			}
		}
	}
	return false
}

// Index names on the workload informers.
const (
	byConfig = "config" // every ConfigMap and Secret an opted-in workload uses, as ObjectRef.String
	byOptIn  = "optIn"  // "true" for opted-in workloads
	// byPattern: the namespace, for workloads whose Reloader reload lists hold a regular
	// expression (rare): a change of any object there is looked at for them.
	byPattern = "pattern"
)

// Run waits for the caches, then runs workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	klog.InfoS("waiting for informer caches")
	if !cache.WaitForCacheSync(ctx.Done(), c.Informers.Synced()...) {
		return fmt.Errorf("caches did not sync: %w", context.Cause(ctx))
	}
	klog.InfoS("caches synced; reconciling", "workers", workers)
	c.primeInFlight()
	c.leading.Store(true)
	defer c.leading.Store(false)
	var wg sync.WaitGroup
	if c.crash != nil {
		wg.Go(func() { c.crash.Run(ctx) })
	}
	if c.LivePodsEvery > 0 {
		wg.Go(func() { c.watchLivePods(ctx, c.LivePodsEvery) })
	}
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
	}
	<-ctx.Done()
	// Return only once every worker has finished its item: whoever runs us (the leader
	// election) may then let another replica take over without two of them writing at once.
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

func (c *Controller) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	result, err := c.sync(ctx, key)
	if err == nil {
		if d, ok := c.pending.settle(key, result, time.Now()); ok {
			c.Metrics.TriggerLatency.Observe(d.Seconds())
		}
	}
	if errors.Is(err, errStale) || apierrors.IsConflict(err) || errors.Is(err, revisions.ErrSourceChanged) {
		// The decision was made on a cache that is a moment behind; the informer catches up
		// and the next try decides again. Routine during rollouts, not an error. A kind wave
		// may list but not watch catches up only when listed again, which is asked for here:
		// otherwise every try until the next minute's list meets the same 409.
		c.Informers.Relist()
		klog.V(2).InfoS("cache behind the API server; reconciling again", "workload", key, "reason", err.Error())
		c.Metrics.Reconciles.WithLabelValues(ResultRetry).Inc()
		c.queue.AddRateLimited(key)
		return true
	}
	if err != nil {
		c.Metrics.Reconciles.WithLabelValues(ResultError).Inc()
		c.Metrics.Errors.Inc()
		klog.ErrorS(err, "reconcile failed; retrying with backoff", "workload", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.Metrics.Reconciles.WithLabelValues(result).Inc()
	c.queue.Forget(key)
	return true
}

// sync is one look at one workload, in the shape of sample-controller's syncHandler: read it
// from the cache, gather what the decision needs, plan, apply. The rule itself is plan's.
func (c *Controller) sync(ctx context.Context, key string) (string, error) {
	kind, ns, name, err := workload.SplitKey(key)
	if err != nil {
		return ResultIgnored, nil // a bad key can never succeed
	}
	w, ok := c.Informers.Workload(kind, ns, name)
	if !ok {
		c.forget(key)
		return ResultIgnored, nil
	}
	if resumed, err := c.finishStakaterPause(ctx, w); resumed || err != nil {
		return ResultResumed, err
	}
	d, err := plan(c.gather(ctx, w))
	if err != nil {
		return "", fmt.Errorf("%s: %w", w, err)
	}
	return c.apply(ctx, w, d)
}

// forget drops what this replica keeps of a workload it no longer looks after.
func (c *Controller) forget(key string) {
	c.pace.Abandon(key, time.Now())
	c.follow.Forget(key)
	c.pending.drop(key)
	c.warned.set(key, "")
	c.heldBack.set(key, "")
	c.approvals.set(key, time.Time{})
	c.brakeSaid.set(key, "")
	c.flight.forget(key)
	c.earlier.forget(key)
	c.adopted.forget(key)
	c.repairs.forget(key)
	if c.crash != nil {
		c.crash.Forget(key)
	}
}

func missingMessage(ms []*podrefs.MissingError) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.Error()
	}
	return strings.Join(parts, "; ") + "; the workload rolls once it exists"
}

// missingNames lists the missing objects for the rollout record: names only, bounded.
func missingNames(ms []*podrefs.MissingError) string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Ref.Kind.Lower() + "/" + m.Ref.Name
	}
	return confighash.DescribeChanged(slices.Compact(names))
}

func inputsHash(value string) string {
	sum := sha256.Sum256([]byte(value))
	return hex.EncodeToString(sum[:8])
}

// flight is what the in-flight cap keeps between looks.
type flight struct {
	mu       sync.Mutex
	admitted map[string]bool  // keys let through, not yet followed as rolling
	waiting  map[string]int64 // keys waiting, by when they first wanted to roll
}

// admit decides, under the cap, whether the rollout of key (first wanted at first) starts
// now; first is when it joined the wait, so that the longest waiting goes first.
func (c *Controller) admit(key, namespace string, first time.Time) (ok, queuedNow bool) {
	f := &c.flight
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.waiting == nil {
		f.admitted, f.waiting = map[string]bool{}, map[string]int64{}
	}
	_, was := f.waiting[key]
	if !was {
		f.waiting[key] = first.UnixNano()
	}
	byNS, rolling, self := c.follow.OursRolling(key)
	rolling, byNS = othersInFlight(key, namespace, byNS, rolling, self, f.admitted)
	waiting := make([]pacing.Waiter, 0, len(f.waiting))
	for k, at := range f.waiting {
		waiting = append(waiting, pacing.Waiter{Key: k, First: at})
	}
	if !c.primed.Load() {
		return false, !was // the rollouts a former leader left under way are not counted yet
	}
	if !c.InFlight.MayStart(key, rolling, byNS, waiting) {
		return false, !was
	}
	delete(f.waiting, key)
	f.admitted[key] = true
	return true, false
}

// othersInFlight counts the rollouts under way that take a slot from key's: those followed as
// rolling (ours, by namespace; self says key is among them) and those admitted and not yet
// followed, each once, key's own never. Its own is no other's slot: a second change of a
// workload under way, or a look on a cache that does not show its just-written rollout yet
// (which the write's resourceVersion then refuses), must not wait for itself, nor say again
// that it is queued.
func othersInFlight(key, namespace string, byNS map[string]int, rolling int, self bool, admitted map[string]bool) (int, map[string]int) {
	if self {
		rolling--
		byNS[namespace]--
	}
	for k := range admitted {
		if k == key {
			continue
		}
		rolling++
		_, rest, _ := strings.Cut(k, "/")
		ns, _, _ := strings.Cut(rest, "/")
		byNS[ns]++
	}
	return rolling, byNS
}

// leave: key no longer wants to roll (its config went back, a window or a brake holds it),
// so it waits for no slot and holds up nobody; it rejoins with its first wish when it wants to
// roll again (pacing keeps it).
func (f *flight) leave(key string) {
	f.mu.Lock()
	delete(f.waiting, key)
	f.mu.Unlock()
}

// primeInFlight judges every workload once before the workers start, so that the in-flight cap
// counts the rollouts a former leader left under way from the first admission on. A workload
// seen for the first time reports nothing (rolloutwatch.Tracker.Transition).
func (c *Controller) primeInFlight() {
	defer c.primed.Store(true)
	if !c.InFlight.On() {
		return
	}
	now := time.Now()
	for kind, list := range c.Informers.workloads {
		for _, inf := range list {
			for _, k := range inf.GetIndexer().ListKeys() {
				ns, name, err := cache.SplitMetaNamespaceKey(k)
				if err != nil {
					continue
				}
				w, ok := c.Informers.Workload(kind, ns, name)
				if !ok || w.Progress.Untracked || !w.Progress.Observed {
					continue
				}
				rec, err := rolloutrecord.ParseRecord(w.Meta.Annotations[rolloutrecord.Annotation])
				if err != nil {
					continue
				}
				c.follow.Transition(w.Key(), w.String(), rec, rolloutrecord.Evaluate(rec, w.Progress, now, c.RolloutDeadline))
			}
		}
	}
}

func sameNamespace(key, namespace string) bool {
	_, rest, _ := strings.Cut(key, "/")
	return strings.HasPrefix(rest, namespace+"/")
}

// started: key's rollout is written (and followed as rolling) or failed to be; its admission
// is spent.
func (c *Controller) started(key string) {
	c.flight.mu.Lock()
	delete(c.flight.admitted, key)
	c.flight.mu.Unlock()
}

func (f *flight) forget(key string) {
	f.mu.Lock()
	delete(f.admitted, key)
	delete(f.waiting, key)
	f.mu.Unlock()
}

// freed looks again at the workloads that waited longest, now that a rollout in namespace is
// over: the first in the cluster and the first in that namespace.
func (c *Controller) freed(namespace string) {
	c.flight.mu.Lock()
	var first, firstInNS pacing.Waiter
	for k, at := range c.flight.waiting {
		w := pacing.Waiter{Key: k, First: at}
		if first.Key == "" || w.First < first.First || w.First == first.First && w.Key < first.Key {
			first = w
		}
		if sameNamespace(k, namespace) && (firstInNS.Key == "" || w.First < firstInNS.First || w.First == firstInNS.First && w.Key < firstInNS.Key) {
			firstInNS = w
		}
	}
	c.flight.mu.Unlock()
	for _, w := range []pacing.Waiter{first, firstInNS} {
		if w.Key != "" {
			c.queue.Add(w.Key)
		}
	}
}

// RolloutsQueued counts the rollouts waiting under the in-flight cap, for the gauge.
func (c *Controller) RolloutsQueued() float64 {
	c.flight.mu.Lock()
	defer c.flight.mu.Unlock()
	return float64(len(c.flight.waiting))
}
