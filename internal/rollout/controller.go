// Package rollout owns wave's controller: the caches (informers.go) with the reverse index
// from config to workloads as an informer indexer, the work queue, and the reconcile that decides from the
// caches and patches the pod template when the config its pods use changed. What a template
// references is package refs; Wave's hash and our digests are package confighash; the
// workload kinds are package workload; the migration from Wave 0.5 is package migrate.
//
//	inf := rollout.NewInformers(client, nil, labels.Everything(), 5*time.Minute, rollout.Digester{})
//	c := rollout.NewController(rollout.Config{Client: client, Informers: inf, Recorder: rec, Metrics: m})
//	inf.Start(ctx); err := c.Run(ctx, 4)
//
// The reconcile is level-triggered, in the shape of kubernetes/sample-controller: events only
// say which workload to look at; sync reads the workload and the digests of its config from
// the caches and decides from them alone.
package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/confighash"
	"github.com/configwave/configwave/internal/outcome"
	"github.com/configwave/configwave/internal/refs"
	"github.com/configwave/configwave/internal/workload"
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
	Client    kubernetes.Interface
	Dynamic   dynamic.Interface // custom workload kinds (Argo Rollouts); nil where none is served
	Informers *Informers
	Recorder  record.EventRecorder
	Metrics   *Metrics
	Format    confighash.HashFormat // default HashWave
	HashKey   []byte                // HMAC key for the config hash (--hash-key-file)
	// DigestKey keys the digests of the inputs record (the install key, or HashKey when that
	// is set); the Informers' Digester must use it too. Default HashKey.
	DigestKey []byte
	DryRun    bool // decide, log and emit Events; write nothing
	// AllowCrossNamespaceRefs lets extra-* entries name other namespaces (Wave's behaviour).
	AllowCrossNamespaceRefs bool
	// Dialects are the annotation dialects read (--annotations); zero: Wave's and Reloader's.
	Dialects Dialects
	// Reloader holds Stakater Reloader's flags that narrow what rolls.
	Reloader ReloaderOptions
	// Coalesce holds a rollout this long after the first change of a quiet workload, so
	// that changes arriving together roll once (--coalesce); 0 rolls at once.
	Coalesce time.Duration
	// MinRolloutInterval is the floor between two rollouts of one workload (raised per
	// workload by its annotation, or Reloader's pause-period); 0 none.
	MinRolloutInterval time.Duration
	// UpdateRate caps rollouts per second across all workloads, with bursts of UpdateBurst
	// (--update-rate, --update-burst, Wave's names); 0 none.
	UpdateRate  float64
	UpdateBurst int
	// RolloutDeadline: a StatefulSet or DaemonSet rollout not complete after this long counts
	// as failed (a Deployment's own progressDeadlineSeconds decides for it); 0 never.
	RolloutDeadline time.Duration
	// PodClient, when set, reads the pods of workloads under a config rollout, so that new
	// pods crash-looping fail the rollout at once (give it a rate limit of its own).
	PodClient kubernetes.Interface
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
	keyID   string // names DigestKey in the inputs records
	queue   workqueue.TypedRateLimitingInterface[string]
	full    *fullObjects
	follow  *follower
	crash   *crashLoops // nil without a PodClient
	pace    *pacer
	leading atomic.Bool // Run is running: this replica decides
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
	c.full = newFullObjects(cfg.Client, cfg.Informers)
	c.follow = newFollower()
	c.pace = newPacer(cfg.Coalesce, cfg.MinRolloutInterval, cfg.Reloader.Dialect.PausePeriod())
	c.pace.limitRate(cfg.UpdateRate, cfg.UpdateBurst)
	if cfg.PodClient != nil {
		c.crash = newCrashLoops(cfg.PodClient, cfg.Informers, func(key string) { c.queue.Add(key) })
	}
	for kind, list := range cfg.Informers.workloads {
		for _, inf := range list {
			// The reverse index lives in the informers, kept current by client-go on every
			// replica: a standby that becomes the leader finds it complete.
			if err := inf.AddIndexers(cache.Indexers{byConfig: c.configKeys, byOptIn: c.optInKey, byPattern: c.patternKey}); err != nil {
				return nil, fmt.Errorf("index %s by the config they use: %w", kind, err)
			}
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    c.enqueueWorkload,
				UpdateFunc: func(_, obj any) { c.enqueueWorkload(obj) },
				DeleteFunc: func(obj any) { c.enqueueDeleted(kind, obj) },
			}); err != nil {
				return nil, err
			}
		}
	}
	if ns := cfg.Informers.namespaces; ns != nil {
		// A namespace's labels decide for all its workloads (--namespace-selector).
		if _, err := ns.AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, obj any) {
				if !maps.Equal(old.(metav1.Object).GetLabels(), obj.(metav1.Object).GetLabels()) {
					c.enqueueNamespace(obj.(metav1.Object).GetName())
				}
			},
		}); err != nil {
			return nil, err
		}
	}
	cfg.Informers.whole.wanted = c.used
	for kind, list := range cfg.Informers.configs {
		for _, inf := range list {
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
				AddFunc: func(obj any, initialList bool) {
					// Every workload's own first add queues it, and workers start only once
					// all caches are synced: what the initial list brings tells them nothing
					// more. Skipping it spares a second and third reconcile of each workload
					// at start (100,000 objects, 10,000 workloads: 23,000 reconciles).
					if !initialList {
						c.enqueueUsers(kind, obj)
					}
				},
				UpdateFunc: func(old, obj any) {
					// The digested objects keep only the metadata that decides what rolls (the
					// ignore and match annotations, labels for --resource-label-selector): any
					// other metadata-only update concerns nobody.
					o, ok1 := old.(*confighash.Digested)
					n, ok2 := obj.(*confighash.Digested)
					if !ok1 || !ok2 || !o.SameKeys(n) ||
						!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) || !maps.Equal(o.GetLabels(), n.GetLabels()) {
						c.enqueueUsers(kind, obj)
					}
				},
				DeleteFunc: func(obj any) {
					if m, ok := metaOf(obj); ok {
						c.Informers.whole.forget(refs.ObjectRef{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()})
					}
					c.enqueueUsers(kind, obj)
				},
			}); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// Held is how many workloads have a rollout held back (--coalesce, a floor), for the gauge.
func (c *Controller) Held() float64 { return c.pace.Held() }

// QueueDepth and Tracked feed the gauges.
func (c *Controller) QueueDepth() float64 { return float64(c.queue.Len()) }
func (c *Controller) Tracked() float64 {
	n := 0
	for _, list := range c.Informers.workloads {
		for _, inf := range list {
			keys, _ := inf.GetIndexer().IndexKeys(byOptIn, "true")
			n += len(keys)
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

func (c *Controller) enqueueUsers(kind refs.ConfigKind, obj any) {
	m, ok := metaOf(obj)
	if !ok {
		return
	}
	ref := refs.ObjectRef{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()}
	users := 0
	for _, list := range c.Informers.workloads {
		for _, inf := range list {
			objs, _ := inf.GetIndexer().ByIndex(byConfig, ref.String())
			for _, obj := range objs {
				c.enqueueWorkload(obj)
			}
			users += len(objs)
			patterned, _ := inf.GetIndexer().ByIndex(byPattern, ref.Namespace)
			for _, obj := range patterned {
				c.enqueueWorkload(obj)
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

// used reports whether an opted-in workload uses ref (the byConfig index).
func (c *Controller) used(ref refs.ObjectRef) bool {
	for _, list := range c.Informers.workloads {
		for _, inf := range list {
			if keys, err := inf.GetIndexer().IndexKeys(byConfig, ref.String()); err == nil && len(keys) > 0 {
				return true
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

// configKeys is the byConfig index function: what an opted-in workload's template uses,
// objects that do not exist yet included, other namespaces only where they are allowed.
func (c *Controller) configKeys(obj any) ([]string, error) {
	w, ok := workload.Of(obj)
	if !ok {
		return nil, nil
	}
	sel := c.selectionOf(w)
	if !sel.optedIn() {
		return nil, nil
	}
	used := refs.Extract(w.Meta.Namespace, w.Meta.Annotations, &w.Template.Spec)
	if !c.AllowCrossNamespaceRefs {
		used.DropOtherNamespaces(w.Meta.Namespace)
	}
	all := union(used.Visible.Refs(), used.Wave.Refs())
	if sel.stakater != nil { // names in Reloader's reload lists, used by the pods or not
		for kind, list := range map[refs.ConfigKind][]*regexp.Regexp{refs.ConfigMap: sel.stakater.ConfigMapNames, refs.Secret: sel.stakater.SecretNames} {
			for _, re := range list {
				if name, ok := refs.Literal(re); ok {
					all = union(all, []refs.ObjectRef{{Kind: kind, Namespace: w.Meta.Namespace, Name: name}})
				}
			}
		}
	}
	keys := make([]string, len(all))
	for i, r := range all {
		keys[i] = r.String()
	}
	return keys, nil
}

func (c *Controller) optInKey(obj any) ([]string, error) {
	if w, ok := workload.Of(obj); ok && c.selectionOf(w).optedIn() {
		return []string{"true"}, nil
	}
	return nil, nil
}

// patternKey is the byPattern index function: the namespace of a workload whose Reloader
// reload list holds a regular expression, which any object of the namespace may match.
func (c *Controller) patternKey(obj any) ([]string, error) {
	w, ok := workload.Of(obj)
	if !ok {
		return nil, nil
	}
	if sel := c.selectionOf(w); sel.stakater != nil && sel.stakater.HasPatterns() {
		return []string{w.Meta.Namespace}, nil
	}
	return nil, nil
}

// Run waits for the caches, then runs workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	klog.InfoS("waiting for informer caches")
	if !cache.WaitForCacheSync(ctx.Done(), c.Informers.Synced()...) {
		return fmt.Errorf("caches did not sync: %w", context.Cause(ctx))
	}
	klog.InfoS("caches synced; reconciling", "workers", workers)
	c.leading.Store(true)
	defer c.leading.Store(false)
	var wg sync.WaitGroup
	if c.crash != nil {
		wg.Go(func() { c.crash.run(ctx) })
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
	if errors.Is(err, errStale) || apierrors.IsConflict(err) {
		// The decision was made on a cache that is a moment behind; the informer catches up
		// and the next try decides again. Routine during rollouts, not an error.
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

// sync decides, for one workload, from the caches alone:
//
//   - not opted in, or gone: forget it; never write to it.
//   - required config missing: an Event names it; no rollout (new pods could not start);
//     a workload seen for the first time gets its inputs recorded, absent parts included, so
//     that the config's creation rolls it.
//   - inputs equal to the recorded ones (resync, restart, metadata-only change): nothing.
//   - no inputs recorded yet (a new workload, or one adopted from Wave): when its template
//     hash is absent or equals Wave's formula on the current data, its pods run the current
//     config: record the inputs, which rolls nothing. Otherwise roll.
//   - inputs differ from the recorded ones: the pods run old config: roll, with one patch that
//     writes Wave's hash and our inputs hash into the template and the inputs into metadata.
func (c *Controller) sync(ctx context.Context, key string) (string, error) {
	kind, ns, name, err := workload.SplitKey(key)
	if err != nil {
		return ResultIgnored, nil // a bad key can never succeed
	}
	w, ok := c.Informers.Workload(kind, ns, name)
	if ok && kind == workload.Deployment && c.Dialects.orDefault().Stakater && !c.Reloader.Namespaces[ns] {
		// Whether or not it still opts in: a Deployment Reloader paused must not stay paused.
		if wait, reloaders := reloaderResume(w.Progress.Paused, w.Meta.Annotations, c.Reloader.Dialect, time.Now()); reloaders {
			if wait > 0 {
				c.queue.AddAfter(key, wait)
			} else {
				return ResultResumed, c.resumeReloaderPause(ctx, w)
			}
		}
	}
	if !ok || !c.selectionOf(w).optedIn() {
		c.pace.rolled(key)
		c.follow.forget(key)
		if c.crash != nil {
			c.crash.forget(key)
		}
		return ResultIgnored, nil
	}
	result, err := c.decide(ctx, w)
	if err == nil && result != ResultHeld {
		c.pace.rolled(key) // rolled, or nothing to roll any more
	}
	if err == nil && result != ResultRolled {
		c.followUp(ctx, w)
	}
	return result, err
}

// decide is sync for an opted-in workload in the cache.
func (c *Controller) decide(ctx context.Context, w workload.Workload) (string, error) {
	ns := w.Meta.Namespace
	rec, _ := outcome.ParseRecord(w.Meta.Annotations[outcome.Annotation]) // followUp reports a bad one
	sel := c.selectionOf(w)
	if sel.stakater != nil {
		for _, p := range sel.stakater.Problems {
			c.Recorder.Event(w.Object, corev1.EventTypeWarning, "InvalidAnnotation", p+"; the entry is skipped")
		}
	}
	for _, a := range []string{MinRolloutIntervalAnnotation, c.pace.pausePeriod} {
		if _, err := ParseInterval(w.Meta.Annotations[a]); err != nil {
			c.Recorder.Eventf(w.Object, corev1.EventTypeWarning, "InvalidAnnotation", "annotation %s: %v; it is not applied: use a duration such as 30s or 5m", a, err)
		}
	}
	used := refs.Extract(ns, w.Meta.Annotations, &w.Template.Spec)
	if !c.AllowCrossNamespaceRefs {
		for r, where := range used.DropOtherNamespaces(ns) {
			c.Recorder.Eventf(w.Object, corev1.EventTypeWarning, "InvalidAnnotation",
				"%s names %s in another namespace; wave reads only the workload's own namespace, so the entry is skipped: move the object here, or start wave with --allow-cross-namespace-refs",
				where, r)
		}
	}
	ignored := used.DropIgnored(c.ignored)
	all := union(used.Visible.Refs(), used.Wave.Refs())
	for _, p := range used.Problems {
		c.Recorder.Event(w.Object, corev1.EventTypeWarning, "InvalidAnnotation", p+"; the entry is skipped")
	}
	for _, r := range all {
		if !c.Informers.Watches(r.Namespace) { // only an extra-* entry can name another namespace
			c.Recorder.Eventf(w.Object, corev1.EventTypeWarning, "InvalidAnnotation",
				"%s %s/%s is in a namespace wave does not watch, so it always counts as absent: add %s to wave's --namespaces, or drop the entry",
				strings.ToLower(string(r.Kind)), r.Namespace, r.Name, r.Namespace)
		}
	}

	uses := c.recorded(ns, used, sel)
	for r := range uses { // a Reloader reload list may name an ignored object too
		if c.ignored(r) {
			ignored[r] = true
			delete(uses, r)
		}
	}
	in := confighash.InputsOf(ns, uses, c.Informers.Digests)
	value := confighash.WithKeyID(c.keyID, in.Value) // the record to write
	recorded, hasRecord := w.Meta.Annotations[InputsAnnotation]
	recID, recInputs := confighash.SplitKeyID(recorded)
	if len(in.Missing) > 0 {
		msg := missingMessage(in.Missing)
		c.Recorder.Event(w.Object, corev1.EventTypeWarning, "ConfigMissing", msg)
		klog.V(2).InfoS("required config missing; waiting for it", "workload", w.String(), "missing", msg)
		waiting := rec
		if names := missingNames(in.Missing); rec.Missing != names {
			waiting.Missing, waiting.MissingSince = names, time.Now().UTC().Truncate(time.Second)
		}
		switch {
		case !hasRecord:
			return ResultMissing, c.patch(ctx, w, "baseline", &value, waiting, "", "")
		case waiting != rec:
			return ResultMissing, c.patch(ctx, w, "missing", nil, waiting, "", "")
		}
		return ResultMissing, nil
	}
	if original, disabled := w.Meta.Annotations[refs.SchedulingDisabledAnnotation]; disabled {
		return ResultRolled, c.restoreScheduling(ctx, w, original)
	}
	present := rec
	present.Missing, present.MissingSince = "", time.Time{}
	if hasRecord && recID == c.keyID && recInputs == in.Value {
		if present != rec { // the config is back as it was: nothing to roll
			return ResultUnchanged, c.patch(ctx, w, "missing", nil, present, "", "")
		}
		return ResultUnchanged, nil
	}
	// What the pods run, entry by entry, to name what changed.
	ran, now := confighash.ParseInputs(recInputs), in.Objects
	if hasRecord && recID != c.keyID {
		switch {
		case recID == "" && recInputs == in.Value:
			// Written under this key before records named their key (--hash-key-file).
			return ResultBaseline, c.patch(ctx, w, "baseline", &value, present, "", "")
		case recID == "":
			// Unkeyed digests, written before the install key: make the same from the whole
			// objects, once, to tell whether the pods run the current config.
			old, err := c.unkeyedInputs(ctx, ns, uses)
			if err != nil {
				return "", fmt.Errorf("%s: read the config to adopt its inputs record: %w", w, err)
			}
			if old.Value == recInputs {
				klog.V(2).InfoS("inputs record keyed; nothing to roll", "workload", w.String())
				return ResultBaseline, c.patch(ctx, w, "baseline", &value, present, "", "")
			}
			now = old.Objects
		default:
			// Digests under a key wave no longer has: judge by Wave's hash, as for a
			// workload without a record.
			hasRecord = false
		}
	}

	changed := confighash.Changed(ran, now)
	if hasRecord {
		// Only a change of what the workload follows rolls it: the record covers every object
		// the pods use, but a Reloader workload follows only what its annotations name.
		entries := map[string]refs.ObjectRef{}
		for r := range uses {
			entries[confighash.EntryName(ns, r)] = r
		}
		for r := range ignored {
			entries[confighash.EntryName(ns, r)] = r
		}
		var rolling []string
		for _, e := range changed {
			before, was := ran[e]
			if !was && now[e] == "absent" {
				continue // newly named, and not there: nothing the pods see changed
			}
			created, deleted := !was || before == "absent", now[e] == "absent"
			if !sel.wave && (created && !c.Reloader.RollOnCreate || deleted && !c.Reloader.RollOnDelete) {
				continue // Reloader rolls on an object's creation or deletion only when told to (--reload-on-create, --reload-on-delete)
			}
			if r, ok := entries[e]; ok && ignored[r] {
				continue // just ignored: it leaves the record, and rolls nothing
			}
			if r, ok := entries[e]; ok && c.follows(ns, used, sel, r) || !ok && sel.wave {
				rolling = append(rolling, e)
			}
		}
		if len(rolling) == 0 {
			klog.V(2).InfoS("config the workload does not follow changed; recorded, nothing to roll", "workload", w.String())
			return ResultBaseline, c.patch(ctx, w, "baseline", &value, present, "", "")
		}
		changed = rolling
	}

	current := w.Template.Annotations[refs.ConfigHashAnnotation]
	hash := ""
	if sel.wave {
		var err error
		hash, err = confighash.KeyedWaveHash(c.Format, c.HashKey, used.Wave, func(r refs.ObjectRef) (any, error) { return c.full.get(ctx, r) })
		var missing *refs.MissingError
		switch {
		case errors.As(err, &missing):
			hash = current // Wave leaves its hash as it is when its view misses something
		case err != nil:
			return "", fmt.Errorf("%s: compute the config hash: %w", w, err)
		}
	}
	what := confighash.DescribeChanged(changed)
	if !hasRecord {
		// Adopted: from Wave, its hash must be Wave's of the current data; from Reloader, its
		// marks must be Reloader's hashes of the current data. Then the pods run the current
		// config and nothing rolls.
		waveBehind := sel.wave && current != "" && current != hash
		stBehind, why := false, ""
		if sel.stakater != nil {
			var err error
			if stBehind, why, err = c.stakaterBehind(ctx, w, ns, used, sel, uses); err != nil {
				return "", fmt.Errorf("%s: read the config to compare Reloader's marks: %w", w, err)
			}
		}
		if !waveBehind && !stBehind {
			klog.V(2).InfoS("recorded the config the pods run; nothing to roll", "workload", w.String(), "hash", current)
			return ResultBaseline, c.patch(ctx, w, "baseline", &value, present, "", "")
		}
		what = "config-hash annotation differs from the current config"
		if !waveBehind {
			what = why
		}
	}
	if d, why := c.pace.hold(w, rec, time.Now()); d > 0 {
		klog.V(2).InfoS("rollout held", "workload", w.String(), "changed", what, "for", d.Round(time.Millisecond), "why", why)
		c.queue.AddAfter(w.Key(), d)
		return ResultHeld, nil
	}
	shown := hash
	if !sel.wave {
		shown = inputsHash(value)
	}
	msg := fmt.Sprintf("%s changed; rolling out (config hash %s)", what, short(shown))
	if c.DryRun {
		msg = "dry run: would roll: " + msg
	}
	c.Recorder.Event(w.Object, corev1.EventTypeNormal, "ConfigChanged", msg)
	klog.InfoS("config changed; rolling out", "workload", w.String(), "changed", what, "hash", hash, "dryRun", c.DryRun)
	next := outcome.Record{Change: what, Started: time.Now().UTC().Truncate(time.Millisecond)}
	if v := outcome.Evaluate(rec, w.Progress, time.Now(), c.RolloutDeadline); v.State == outcome.Rolling && rec.Change != what {
		next.Change = rec.Change + "; " + what // the pods that come up carry the earlier change too
	}
	if err := c.patch(ctx, w, "rollout", &value, next, hash, inputsHash(value)); err != nil {
		return "", err
	}
	if !c.DryRun {
		// What the write does not do by itself (a CronJob: one Job now). Tried a few times: the
		// record already says rolled, so a later look would not try again.
		err := retry.OnError(retry.DefaultBackoff, func(error) bool { return ctx.Err() == nil }, func() error { return workload.Restart(ctx, c.clients(), w) })
		if err != nil {
			c.Recorder.Eventf(w.Object, corev1.EventTypeWarning, "RestartFailed", "%v; its next scheduled run uses the new config", err)
		}
	}
	if !w.Progress.Untracked {
		c.follow.started(w.Key(), next)
	}
	return ResultRolled, nil
}

// patch writes the inputs record (unless inputs is nil), the rollout record and, for a rollout,
// the template annotations, in one merge patch carrying the resourceVersion the decision was
// made on: if the workload changed in between, the API server answers 409 and the workload is
// reconciled again.
func (c *Controller) patch(ctx context.Context, w workload.Workload, what string, inputs *string, rec outcome.Record, hash, inHash string) error {
	type meta struct {
		Annotations     map[string]any `json:"annotations"`
		ResourceVersion string         `json:"resourceVersion,omitempty"`
	}
	annotations := map[string]any{}
	if inputs != nil {
		annotations[InputsAnnotation] = *inputs
	}
	switch {
	case rec != (outcome.Record{}):
		annotations[outcome.Annotation] = rec.String()
	case w.Meta.Annotations[outcome.Annotation] != "":
		annotations[outcome.Annotation] = nil // nothing left to say: a merge patch's null deletes it
	}
	body := map[string]any{"metadata": meta{Annotations: annotations, ResourceVersion: w.Meta.ResourceVersion}}
	if inHash != "" {
		tmpl := map[string]string{InputsHashAnnotation: inHash}
		if hash != "" {
			tmpl[refs.ConfigHashAnnotation] = hash
		}
		body["spec"] = map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": tmpl}}}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	if c.DryRun {
		return nil
	}
	err = workload.Patch(ctx, c.clients(), w.Kind, w.Meta.Namespace, w.Meta.Name, b)
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile; the delete event cleans the index
	}
	if what == "rollout" && c.Metrics.OnRolloutWrite != nil && !apierrors.IsConflict(err) {
		c.Metrics.OnRolloutWrite(RolloutWrite{Kind: string(w.Kind), Namespace: w.Meta.Namespace, Name: w.Meta.Name, Changed: rec.Change, OK: err == nil})
	}
	if err != nil {
		return fmt.Errorf("%s: patch (%s): %w", w, what, err)
	}
	c.Metrics.Patches.WithLabelValues(string(w.Kind), what).Inc()
	return nil
}

func missingMessage(ms []*refs.MissingError) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.Error()
	}
	return strings.Join(parts, "; ") + "; the workload rolls once it exists"
}

// restoreScheduling undoes what Wave 0.7 and later did to a workload whose config was
// missing (see refs.SchedulingDisabledAnnotation), now that the config exists: the original
// scheduler back, the annotation gone, in one patch conditional on the version read. The pods
// waiting for a scheduler that does not exist are replaced; the next look decides as usual.
func (c *Controller) restoreScheduling(ctx context.Context, w workload.Workload, original string) error {
	var scheduler any // null: the API server's default scheduler
	if original != "" {
		scheduler = original
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{refs.SchedulingDisabledAnnotation: nil}, "resourceVersion": w.Meta.ResourceVersion},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"schedulerName": scheduler}}},
	})
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("Wave had disabled scheduling (schedulerName %q) while config was missing; the config exists: scheduler restored", w.Template.Spec.SchedulerName)
	if c.DryRun {
		c.Recorder.Event(w.Object, corev1.EventTypeNormal, "SchedulingRestored", "dry run: would do: "+msg)
		return nil
	}
	if err := workload.Patch(ctx, c.clients(), w.Kind, w.Meta.Namespace, w.Meta.Name, body); err != nil {
		return fmt.Errorf("%s: restore the scheduler Wave disabled: %w", w, err)
	}
	c.Recorder.Event(w.Object, corev1.EventTypeNormal, "SchedulingRestored", msg)
	klog.InfoS("restored the scheduler Wave had disabled", "workload", w.String(), "scheduler", original)
	return nil
}

// unkeyedInputs is the inputs record as wave wrote it before digests were keyed, made from the
// whole objects (read from the API once, and shared for a while by the workloads that use
// them).
func (c *Controller) unkeyedInputs(ctx context.Context, namespace string, uses refs.Uses) (confighash.Inputs, error) {
	var firstErr error
	in := confighash.InputsOf(namespace, uses, func(r refs.ObjectRef) (map[string]string, bool) {
		obj, err := c.full.get(ctx, r)
		if err != nil || obj == nil {
			if firstErr == nil {
				firstErr = err
			}
			return nil, false
		}
		digested, err := confighash.Digester{}.Transform(obj)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return nil, false
		}
		return confighash.KeyDigests(digested), true
	})
	return in, firstErr
}

// missingNames lists the missing objects for the rollout record: names only, bounded.
func missingNames(ms []*refs.MissingError) string {
	var names []string
	for _, m := range ms {
		n := strings.ToLower(string(m.Ref.Kind)) + "/" + m.Ref.Name
		if len(names) == 0 || names[len(names)-1] != n {
			names = append(names, n)
		}
	}
	return confighash.DescribeChanged(names)
}

func inputsHash(value string) string {
	sum := sha256.Sum256([]byte(value))
	return hex.EncodeToString(sum[:8])
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	if hash == "" {
		return "unchanged"
	}
	return hash
}

func union(a, b []refs.ObjectRef) []refs.ObjectRef {
	seen := map[refs.ObjectRef]bool{}
	var out []refs.ObjectRef
	for _, list := range [][]refs.ObjectRef{a, b} {
		for _, r := range list {
			if !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
	}
	return out
}
