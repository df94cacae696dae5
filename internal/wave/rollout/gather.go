package rollout

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/approval"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/pacing"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/window"
	"github.com/configwave/configwave/internal/wave/workload"
)

// gather reads, from the caches, the situation plan decides from.
func (c *Controller) gather(ctx context.Context, w workload.Workload) situation {
	ns := w.Meta.Namespace
	sel := c.selectionOf(w)
	if !sel.optedIn() {
		return situation{}
	}
	rec, _ := rolloutrecord.ParseRecord(w.Meta.Annotations[rolloutrecord.Annotation]) // followUp reports a bad one
	used := podrefs.Extract(ns, w.Meta.Annotations, &w.Template.Spec)
	c.addSecretProviderClasses(used, ns, &w.Template.Spec, sel)
	s := situation{
		Now: time.Now(), DryRun: c.DryRun, OptedIn: true,
		Wave: sel.wave, Stakater: sel.stakater != nil,
		RollOnCreate: c.Reloader.RollOnCreate, RollOnDelete: c.Reloader.RollOnDelete,
		Warned: c.warned.of(w.Key()),
		Rec:    rec, KeyID: c.keyID, CanOwnHash: len(c.HashKey) == 0 && (len(c.DigestKey) > 0 || c.keyID == confighash.MetaID),
		CurrentHash: w.Template.Annotations[podrefs.ConfigHashAnnotation],
		Progress:    w.Progress, Deadline: c.RolloutDeadline,
		RestartBlocked: workload.RestartBlocked(w), RestartInPlace: workload.RestartsInPlace(w),
		SchedulerNow: w.Template.Spec.SchedulerName,
	}
	s.Record, s.HasRecord = w.Meta.Annotations[InputsAnnotation]
	s.Scheduler, s.SchedulingDisabled = w.Meta.Annotations[podrefs.SchedulingDisabledAnnotation]
	s.Pace.Coalesce, s.Pace.FirstWanted = c.pace.Coalesce(), c.pace.WantedSince(w.Key())
	s.Pace.Floor, s.Pace.FloorSource = c.pace.FloorOf(w.Meta.Annotations)
	s.Pace.PauseFirst = s.Pace.FloorSource == c.pace.PausePeriod()
	if s.Pace.PauseFirst && w.Progress.Paused {
		s.Pace.PausedSince, _ = time.Parse(time.RFC3339, w.Meta.Annotations[c.Reloader.Dialect.PausedAt()])
	}

	s.Warnings = c.annotationProblems(w, sel)
	c.gatherGates(&s, w)
	c.gatherRevisions(ctx, &s, w)
	if s.Approval.Manual && !s.Revisions {
		s.Warnings = append(s.Warnings, approval.Annotation+" holds back the rollout, not the config: without "+podrefs.RevisionsAnnotation+
			" kubelet updates mounted files and every new pod reads the live objects; turn revisions on to keep the config too")
	}
	if !c.AllowCrossNamespaceRefs {
		for r, where := range used.DropOtherNamespaces(ns) {
			s.Warnings = append(s.Warnings, where+" names "+r.String()+" in another namespace; wave reads only the workload's own namespace, so the entry is skipped: move the object here, or start wave with --allow-cross-namespace-refs")
		}
	}
	ignored := used.DropIgnored(c.ignored)
	for _, p := range used.Problems {
		s.Warnings = append(s.Warnings, p+"; the entry is skipped")
	}
	for _, r := range used.All() {
		if !c.Informers.Watches(r.Namespace) { // only an extra-* entry can name another namespace
			s.Warnings = append(s.Warnings, r.String()+
				" is in a namespace wave does not watch, so it always counts as absent: add "+r.Namespace+" to wave's --namespaces, or drop the entry")
		}
	}

	uses := c.recorded(ns, used, sel)
	for r := range uses { // a Reloader reload list may name an ignored object too
		if c.ignored(r) {
			ignored.Insert(r)
			delete(uses, r)
		}
	}
	s.Inputs = confighash.InputsOf(ns, uses, c.Informers.Digests)
	s.Entries = c.entries(w, used, sel, uses, ignored, s.Revisions)
	c.gatherSources(&s, w, uses)
	c.gatherHashes(ctx, &s, w, used, sel, uses)
	return s
}

// gatherSources fills in what stands in the way of the sources the workload follows: those
// that change too often (the brake), and those whose content is incomplete.
func (c *Controller) gatherSources(s *situation, w workload.Workload, uses podrefs.Uses) {
	ns := w.Meta.Namespace
	for r := range uses {
		if !s.Entries[r.Short(ns)].Follows {
			continue
		}
		if braked, quietAt := c.brake.Braked(r, s.Now); braked {
			s.Braked = append(s.Braked, r.Short(ns))
			s.BrakedUntil = maxTime(s.BrakedUntil, quietAt)
		}
		if why := c.Informers.Incomplete(r); why != "" {
			if s.Incomplete == nil {
				s.Incomplete = map[string]string{}
			}
			s.Incomplete[r.Short(ns)] = why
		}
	}
	slices.Sort(s.Braked)
	s.BrakeSaid = c.brakeSaid.of(w.Key())
	s.SourceReadyTimeout = c.SourceReadyTimeout
}

// gatherGates fills in the gates a change waits at: approval, the rollout window and its
// rollout-now, each annotation that does not parse a warning.
func (c *Controller) gatherGates(s *situation, w workload.Workload) {
	var problem string
	if s.Approval, problem = approval.Of(w.Meta.Annotations); problem != "" {
		s.Warnings = append(s.Warnings, problem)
	}
	var problems []string
	ns := w.Meta.Namespace
	s.Window, problems = window.Pick(c.RolloutWindow, ns, c.Informers.namespaceAnnotations(ns)[window.Annotation], w.Meta.Annotations[window.Annotation])
	s.Warnings = append(s.Warnings, problems...)
	s.RolloutNow = w.Meta.Annotations[window.NowAnnotation] == "true"
}

// gatherHashes fills in the hashes plan may ask for, each computed only when asked: they read
// whole objects.
func (c *Controller) gatherHashes(ctx context.Context, s *situation, w workload.Workload, used podrefs.References, sel selection, uses podrefs.Uses) {
	ns := w.Meta.Namespace
	whole := func(r configref.Ref) (any, error) { return c.full.get(ctx, r) }
	s.WaveHash = sync.OnceValues(func() (string, error) { return confighash.KeyedWaveHash(c.Format, c.HashKey, used.Wave, whole) })
	inputs := s.Inputs.Value
	s.OwnHash = sync.OnceValues(func() (string, error) {
		if c.keyID == confighash.MetaID {
			return confighash.HashOfInputs(inputs), nil // nothing of a Secret's value
		}
		return confighash.KeyedWaveHash(c.Format, c.DigestKey, used.Wave, whole)
	})
	s.EarlierWaveHash = func() (bool, error) {
		for _, f := range confighash.AdoptableFormats {
			if f == c.Format {
				continue
			}
			h, err := confighash.KeyedWaveHash(f, c.HashKey, used.Wave, whole)
			if err != nil {
				return false, err
			}
			if h == s.CurrentHash {
				return true, nil
			}
		}
		return false, nil
	}
	s.StakaterBehind = func() (bool, string, error) { return c.stakaterBehind(ctx, w, ns, used, sel, uses) }
	s.StakaterCurrent = func(names []string) (bool, error) { return c.stakaterCurrent(ctx, w, ns, used, sel, uses, names) }
	s.Unkeyed = func() (confighash.Inputs, error) { return c.inputsOfWhole(ctx, ns, uses, confighash.Digester{}) }
	s.ByMetadata = func() (confighash.Inputs, error) {
		return c.inputsOfWhole(ctx, ns, uses, confighash.Digester{SecretsByMetadata: true})
	}
}

// gatherRevisions fills in what plan decides revisions and holds from.
func (c *Controller) gatherRevisions(ctx context.Context, s *situation, w workload.Workload) {
	var problem string
	s.Revisions, problem = revisionsOn(c.Revisions, w.Meta.Annotations[podrefs.RevisionsAnnotation], s.RestartInPlace)
	if problem != "" {
		s.Warnings = append(s.Warnings, problem)
	}
	s.TemplateInputsHash = w.Template.Annotations[InputsHashAnnotation]
	s.NewestRevision = w.Meta.Labels[revisions.RevisionLabel]
	s.NewestFollowed = w.Meta.Labels[revisions.FollowedLabel]
	s.HeldBackSaid = c.heldBack.of(w.Key())
	s.AtEarlierRevision = func() (bool, error) { return c.atEarlierRevision(ctx, w, s.NewestRevision) }
	s.IndexGone = func(rev string) bool { return c.indexGone(w, rev) }
}

// indexGone says whether w's revision rev should have an index and the caches have none, and
// a repair of it was not tried a moment ago. Without an install key a Secret's snapshot is
// named by its uid and resourceVersion, which a restore changes: made again, its name would
// not be the one the pods read, so that is not asked.
func (c *Controller) indexGone(w workload.Workload, rev string) bool {
	if len(c.Informers.digester.Key) == 0 || !c.repairs.due(w.Key(), rev, time.Now()) || len(c.revisionSources(w)) == 0 {
		return false // a revision of no kept source has no index
	}
	_, cached := c.Informers.config(configref.Ref{Kind: configref.ConfigMap, Namespace: w.Meta.Namespace, Name: revisions.IndexName(rev)})
	return !cached
}

// entries says, for each object of the inputs record and each one ignored, whether its change
// rolls the workload and whether its revisions keep it.
// Which objects its revisions keep is looked up only for a workload that runs with them: a
// resync of ten thousand workloads without revisions walks no pod spec twice.
func (c *Controller) entries(w workload.Workload, used podrefs.References, sel selection, uses podrefs.Uses, ignored sets.Set[configref.Ref], withRevisions bool) map[string]entry {
	ns := w.Meta.Namespace
	kept := map[configref.Ref]bool{}
	if withRevisions {
		for _, r := range revisions.SourcesOf(ns, &w.Template.Spec) {
			kept[r] = !c.ignored(r) && !c.revisionsOff(r) // what ensureRevision snapshots
		}
	}
	out := make(map[string]entry, len(uses)+len(ignored))
	for r := range uses {
		// A class is there while pods report on it: their coming and going rolls nothing.
		out[r.Short(ns)] = entry{Follows: c.follows(ns, used, sel, r), Transient: r.Kind == configref.SecretProviderClass, InRevisions: kept[r]}
	}
	for r := range ignored {
		out[r.Short(ns)] = entry{Ignored: true}
	}
	return out
}

// revisionsOn decides whether a workload runs with revisions: its configwave.io/revisions
// annotation, else --config-revisions (flag). A workload restarted in place
// (rollout-strategy: restart) keeps its template, which is what names a revision, so it
// cannot; a value that is not a boolean leaves the flag's choice. problem is worded for an
// Event.
func revisionsOn(flag bool, annotation string, restartInPlace bool) (on bool, problem string) {
	on = flag
	if annotation != "" {
		v, err := strconv.ParseBool(annotation)
		if err != nil {
			return flag, fmt.Sprintf("annotation %s: %q is not true or false; it is not applied (revisions are %s, as --config-revisions says)", podrefs.RevisionsAnnotation, annotation, onOff(flag))
		}
		on = v
	}
	if on && restartInPlace {
		return false, "annotation " + podrefs.RevisionsAnnotation + ": a workload restarted in place (rollout-strategy: restart) keeps its template, which is what names a revision, so its revisions are off: drop the rollout strategy, or the annotation"
	}
	return on, ""
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// annotationProblems are the entries of the workload's annotations that wave cannot apply.
func (c *Controller) annotationProblems(w workload.Workload, sel selection) []string {
	var out []string
	if sel.stakater != nil {
		for _, p := range sel.stakater.Problems {
			out = append(out, p+"; the entry is skipped")
		}
	}
	for _, a := range []string{pacing.MinRolloutIntervalAnnotation, c.pace.PausePeriod()} {
		if _, err := pacing.ParseInterval(w.Meta.Annotations[a]); err != nil {
			out = append(out, "annotation "+a+": "+err.Error()+"; it is not applied: use a duration such as 30s or 5m")
		}
	}
	return out
}

// inputsOfWhole is the inputs record as dg makes it, from the whole objects (read from the API
// once, and shared for a while by the workloads that use them): as wave wrote it before digests
// were keyed (a Digester without a key), or without a key (Secrets by their metadata), to adopt
// such a record. The whole objects wave keeps in memory carry no uid, so a Secret digested by
// its metadata is read from the API, once a version.
func (c *Controller) inputsOfWhole(ctx context.Context, namespace string, uses podrefs.Uses, dg confighash.Digester) (confighash.Inputs, error) {
	var firstErr error
	in := confighash.InputsOf(namespace, uses, func(r configref.Ref) (map[string]string, bool) {
		if r.Kind == configref.SecretProviderClass {
			return c.Informers.Digests(r) // versions, never keyed
		}
		get := c.full.get
		if dg.SecretsByMetadata && r.Kind == configref.Secret {
			get = c.full.getFromAPI
		}
		obj, err := get(ctx, r)
		if err != nil || obj == nil {
			if firstErr == nil {
				firstErr = err
			}
			return nil, false
		}
		digested, err := dg.Transform(obj)
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

// warnedOf remembers, per workload, the fingerprint of the InvalidAnnotation warnings last
// sent, so that they are sent when they change rather than on every look. A replica that
// becomes the leader sends them once more.
type warnedOf struct {
	mu sync.Mutex
	m  map[string]string
}

func (n *warnedOf) of(key string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.m[key]
}

func (n *warnedOf) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.m)
}

func (n *warnedOf) set(key, fingerprint string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if fingerprint == "" {
		delete(n.m, key)
		return
	}
	if n.m == nil {
		n.m = map[string]string{}
	}
	n.m[key] = fingerprint
}

// approvalsPending keeps, per workload, since when its change waits for approval.
type approvalsPending struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func (a *approvalsPending) set(key string, since time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if since.IsZero() {
		delete(a.m, key)
		return
	}
	if a.m == nil {
		a.m = map[string]time.Time{}
	}
	a.m[key] = since
}

// stats: how many wait, and the longest wait.
func (a *approvalsPending) stats(now time.Time) (n int, oldest time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, since := range a.m {
		oldest = max(oldest, now.Sub(since))
	}
	return len(a.m), oldest
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
