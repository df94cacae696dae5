package onefirst

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/reloader/source"
)

// Source is what the reload loop reads; a Gate is one, over the API source.
type Source interface {
	Run(ctx context.Context)
	WaitForSync(ctx context.Context) bool
	Changed() <-chan struct{}
	Snapshot() source.Snapshot
}

// Store keeps the Record of one workload and source (a Lease).
type Store interface {
	// Get returns the record and the version it was read at; a nil record and "" when none
	// exists. A record that cannot be parsed is returned as nil with its version, so that a
	// claim writes over it.
	Get(ctx context.Context) (*Record, string, error)
	// Put writes r over the version read ("": create it), or returns ErrConflict when another
	// sidecar wrote it since.
	Put(ctx context.Context, r Record, version string) error
}

// ErrConflict means the record changed since it was read: read it again and decide again.
var ErrConflict = errors.New("the rollout record changed since it was read")

// Options tune a Gate.
type Options struct {
	Pod     string        // this sidecar's pod
	Soak    time.Duration // --rollout-soak
	Expiry  time.Duration // a claim or batch place without its pod lives this long; default 1.5×Soak+15s
	MaxBusy func() int    // --rollout-max-unavailable resolved now; nil: 1
	Poll    time.Duration // how often the record is read while anything is pending; default 1s
	// Sample is how often a pod that soaks a content judges its app; default 1s. A Store
	// that watches (Changes) wakes the gate on each change, and then Poll may be longer.
	Sample time.Duration
	// Jitter spreads the claims and joins that one change of the record sets off in every
	// waiting sidecar over up to this long, so that the first one's write reaches the others
	// (through the watch) before they write, instead of N writes of which N-1 conflict; 0 none.
	Jitter time.Duration
	// ReadPod reads how this pod stands, where a decision depends on it (a claim, a place in
	// a batch, a soak); nil: the pod is taken as Ready and not being deleted.
	ReadPod func(ctx context.Context) (PodState, error)
	// Failed says how the app failed since the content was laid out at since ("" healthy),
	// pod being how the pod stands now (nil: it could not be read).
	Failed func(ctx context.Context, since time.Time, pod *PodState) string
	// Began, when set, is told that this pod lays out a content to soak at since, before the
	// reload loop tells the app: how the app stood then is what the soak is judged against.
	Began func(ctx context.Context, since time.Time)
	// OnRejected is told once when this pod rejects a content, with why; OnRefused once when
	// a rejected content is kept out of this pod; OnStartedRejected when the pod starts on a
	// content the others rejected (it has no other).
	OnRejected, OnRefused, OnStartedRejected func(c Content, reason string)
	Clock                                    func() time.Time
	// Keep keeps what is laid out and what is good beside the config, for a restarted
	// sidecar to resume from (KeptFile); nil keeps nothing. Record names the record (the
	// Lease) the state belongs to.
	Keep   Keeper
	Record string
}

// Keeper keeps a sidecar's state across restarts of its container (KeptFile).
type Keeper interface {
	Load() (Kept, bool, error)
	Save(Kept) error
}

// Status is what /status shows of the gate.
type Status struct {
	Content string `json:"content,omitempty"` // the content laid out here (ContentID)
	Waiting string `json:"waiting,omitempty"` // a newer content not laid out here yet
	State   State  `json:"state,omitempty"`   // the newest content's state among the sidecars
	First   string `json:"first,omitempty"`
	Reason  string `json:"reason,omitempty"` // why the newest content was rejected
	Doing   Do     `json:"doing,omitempty"`
	// RunsRejected: the pod started on a content the others rejected, having no other.
	RunsRejected bool `json:"runsRejected,omitempty"`
	// Runs is where the content this pod runs stands (RunsPromoted, ...).
	Runs string `json:"runs,omitempty"`
}

// Where the content a pod runs stands, for /status and configwave_reloader_rollout_runs.
const (
	// RunsPromoted: judged healthy by a soak, or what the pods ran before any change was tried.
	RunsPromoted = "promoted"
	// RunsTrial: this pod soaks it now, first or in a batch.
	RunsTrial = "trial"
	// RunsUntried: laid out without a soak of its own while it is tried elsewhere (the pod
	// started then, and an app cannot start on nothing).
	RunsUntried = "untried"
	// RunsRejected: a pod's app failed on it, and this pod has no other.
	RunsRejected = "rejected"
)

// RunsStates lists the values of Status.Runs.
var RunsStates = []string{RunsPromoted, RunsTrial, RunsUntried, RunsRejected}

// runsState says where content runs stands for pod, rec being the record as last read and good
// the content the pod last found, or saw promoted, healthy.
func runsState(rec *Record, runs, good, pod string) string {
	switch {
	case runs == "":
		return ""
	case rec != nil && rec.Content == runs:
		_, inBatch := rec.Batch[pod]
		switch {
		case rec.State == Rejected:
			return RunsRejected
		case rec.State == Soaking && rec.First == pod, rec.State == Promoted && inBatch:
			return RunsTrial
		case rec.State == Soaking:
			return RunsUntried
		}
		return RunsPromoted
	case rec == nil, rec.Good == runs, good == runs:
		return RunsPromoted
	}
	return RunsUntried
}

// Gate hands the reload loop only the content this pod may lay out now (Decide), and takes
// it back to the last good one when the app fails on it.
type Gate struct {
	inner   Source
	store   Store
	opts    Options
	changed chan struct{}
	synced  chan struct{}

	mu        sync.Mutex
	published source.Snapshot
	pubID     string
	laidAt    time.Time
	good      source.Snapshot // the last content this pod ran and found healthy: what PutBack lays out
	goodID    string
	// before is the good content before good: what a rejection of good after its promotion
	// (Record.Before) puts back.
	before   source.Snapshot
	beforeID string
	status   Status
	lastRec  *Record         // the record as last read (a copy: Store.Get returns one)
	told     map[string]bool // contents whose rejection or refusal was reported

	// deferred is the write (its action and the record's version) held back by Jitter until
	// deferredAt; only Run's goroutine uses them, and the fields below.
	deferred   string
	deferredAt time.Time
	// unclaimedSince is when this sidecar last saw the content it holds now (seenWant) with
	// no pod trying it: View.Unclaimed.
	seenWant       string
	unclaimedSince time.Time
	// seen is when this sidecar first saw each renewal and batch entry it holds (observe).
	seen map[string]time.Time
	// rejectedHere holds the contents this pod rejected and put back, whose rejection is not
	// on the record yet (the write conflicted, or the API did not answer), with why.
	rejectedHere map[string]string
	// stopping: this pod's sidecar is stopping (SIGTERM): it gives back its claim or place in
	// the batch and does nothing else (released once it did).
	stopping, released bool
	// resumed: the sidecar restarted and resumed from its kept state; a soak it was in
	// restarts, as the judgement of the app restarted with it (View.Resumed).
	loaded, resumed bool
}

// NewGate gates inner with the record in store.
func NewGate(inner Source, store Store, opts Options) *Gate {
	if opts.Expiry <= 0 {
		opts.Expiry = opts.Soak*3/2 + 15*time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.Sample <= 0 {
		opts.Sample = time.Second
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Failed == nil {
		opts.Failed = func(context.Context, time.Time, *PodState) string { return "" }
	}
	return &Gate{inner: inner, store: store, opts: opts, changed: make(chan struct{}, 1), synced: make(chan struct{}), told: map[string]bool{}, rejectedHere: map[string]string{}}
}

// Changed signals a new snapshot to lay out.
func (g *Gate) Changed() <-chan struct{} { return g.changed }

// WaitForSync blocks until the first content is decided.
func (g *Gate) WaitForSync(ctx context.Context) bool {
	select {
	case <-g.synced:
		return true
	case <-ctx.Done():
		return false
	}
}

// Snapshot is the content this pod may lay out now.
func (g *Gate) Snapshot() source.Snapshot {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.published
}

// CurrentStatus is the gate's part of /status.
func (g *Gate) CurrentStatus() Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.status
	st.Runs = runsState(g.lastRec, g.pubID, g.goodID, g.opts.Pod)
	return st
}

// watchingStore is a Store that watches its record and says when it changed.
type watchingStore interface {
	Watch(ctx context.Context)
	Changes() <-chan struct{}
}

// Run runs the inner source and decides on each of its changes, each change of the record
// (when the store watches it), and again when a decision says when, until ctx ends.
func (g *Gate) Run(ctx context.Context) {
	go g.inner.Run(ctx)
	var recordChanged <-chan struct{}
	if w, ok := g.store.(watchingStore); ok {
		recordChanged = w.Changes()
		go w.Watch(ctx)
	}
	if !g.inner.WaitForSync(ctx) {
		return
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
		case <-g.inner.Changed():
		case <-recordChanged:
		case <-timer.C:
		}
		if ctx.Err() != nil {
			g.giveBack()
			return
		}
		next := g.step(ctx)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if !next.IsZero() {
			timer.Reset(max(next.Sub(g.opts.Clock()), 0))
		}
	}
}

// callTimeout bounds one step's calls to the API (the record, the pod): a connection that died
// silently must not hold the gate until client-go's health check finds it.
const callTimeout = 10 * time.Second

// giveBackTimeout bounds the give-back at SIGTERM: short, as kubelet's grace period runs.
const giveBackTimeout = 3 * time.Second

// giveBack gives this pod's claim or place in the batch back as its sidecar stops (the pod is
// deleted, or the container stopped): another pod takes it at once, rather than after the
// claim expires, and nothing judges the config by an app that is shutting down. A write that
// another sidecar's overtook is decided again, a few times.
func (g *Gate) giveBack() {
	ctx, cancel := context.WithTimeout(context.Background(), giveBackTimeout)
	defer cancel()
	if g.opts.ReadPod != nil {
		// Only a pod being deleted gives its turn back: a container stopped and started again
		// (a failed liveness probe) resumes its trial from what it keeps, and soaks again.
		if st, err := g.opts.ReadPod(ctx); err != nil || !st.Terminating {
			return
		}
	}
	g.stopping = true
	for range 3 {
		g.step(ctx)
		if doing := g.CurrentStatus().Doing; g.released || doing != Release && doing != Reject || ctx.Err() != nil {
			return
		}
	}
}

// step decides once and applies the decision; it returns when to decide again (zero: on the
// next change only).
func (g *Gate) step(parent context.Context) time.Time {
	ctx, cancel := context.WithTimeout(parent, callTimeout)
	defer cancel()
	now := g.opts.Clock()
	if !g.loaded {
		g.loaded = true
		g.resume(now)
	}
	poll := now.Add(g.opts.Poll)
	snap, want := g.wanted()
	rec, version, err := g.store.Get(ctx)
	if err != nil {
		// Cut off from the record: keep what is laid out, and never lay out a content that was
		// not promoted. A pod with nothing yet still starts (Decide's Start needs no record). A
		// pod that soaks a content, as the record last said, still judges its app by what needs
		// no API (the reload's result, --health-url), and puts its good config back at once on
		// a failure: the rejection is recorded once the record can be written.
		klog.ErrorS(err, "cannot read the rollout record; keeping the config laid out until it can be read")
		g.mu.Lock()
		have, laidAt, last := g.pubID, g.laidAt, g.lastRec
		g.mu.Unlock()
		switch {
		case have == "" && want != "":
			g.apply(ctx, snap, want, nil, "", Action{Do: Start}, now, "")
		case have != "" && soaks(last, have, g.opts.Pod):
			if why := g.opts.Failed(ctx, laidAt, nil); why != "" {
				klog.InfoS("warning: this pod's app failed on the config it tries, and the rollout record cannot be read: putting the good config back now, and recording the rejection once the record can be written",
					"content", ContentOf(g.Snapshot()).Name, "why", why)
				g.rejectedHere[have] = why
				g.putBack(now, "", have)
			}
		}
		return poll
	}
	g.mu.Lock()
	have, laidAt, good := g.pubID, g.laidAt, g.goodID
	g.mu.Unlock()
	maxBusy := 1
	if g.opts.MaxBusy != nil {
		maxBusy = g.opts.MaxBusy()
	}
	v := View{Pod: g.opts.Pod, Want: want, Have: have, Good: good, Record: rec, Now: now,
		Soak: g.opts.Soak, Expiry: g.opts.Expiry, MaxBusy: maxBusy, RejectedHere: g.rejectedHere[want] != ""}
	v.SeenRenewed, v.SeenJoined = g.observe(rec, now)
	v.Unclaimed = g.unclaimed(v)
	// The pod is read only where the decision depends on it: while it soaks, and before a
	// claim or a join.
	soaking := have == want && have != "" && soaks(rec, want, g.opts.Pod)
	v.Resumed = g.resumed && soaking
	g.resumed = v.Resumed // a soak that begins later is a soak of its own
	if soaking || g.stopping {
		v = g.withPod(ctx, v, soaking, laidAt)
	}
	act := Decide(v)
	if !soaking && !g.stopping && (act.Do == Claim || act.Do == Join) {
		v = g.withPod(ctx, v, false, laidAt)
		act = Decide(v)
	}
	klog.V(4).InfoS("rollout decision", "do", act.Do, "want", want, "have", have, "standing", v.Standing, "at", act.At)
	if g.stopping && act.Do != Release && act.Do != Reject {
		g.note(rec, want, act)
		return time.Time{} // a stopping sidecar lays nothing out
	}
	return g.apply(ctx, snap, want, rec, version, act, now, v.Failed)
}

// wanted is the content this pod decides about: what its source holds, except where an object
// of it is missing (deleted, or not readable): the reload loop keeps the last set until it is
// back, so a missing object is no content to try, promote or put back to, and the pod decides
// about what it runs.
func (g *Gate) wanted() (source.Snapshot, string) {
	snap := g.inner.Snapshot()
	want := SnapshotID(snap)
	if len(snap.Missing) == 0 {
		return snap, want
	}
	g.mu.Lock()
	published, have := g.published, g.pubID
	g.mu.Unlock()
	if have == "" {
		return snap, want // a pod with nothing yet starts on what there is
	}
	g.once("missing:"+want, func() {
		klog.InfoS("warning: an object of the config is missing; the pod keeps the config it runs until the object is back", "missing", ContentOf(snap).Name)
	})
	return published, have
}

// withPod adds to v how this pod stands and, while it soaks, how its app failed since laidAt.
func (g *Gate) withPod(ctx context.Context, v View, soaking bool, laidAt time.Time) View {
	if g.stopping {
		v.Standing = Terminating
		return v
	}
	var pod *PodState
	if g.opts.ReadPod != nil {
		st, err := g.opts.ReadPod(ctx)
		if err != nil {
			klog.V(2).InfoS("cannot read this pod; no verdict on this sample", "err", err.Error())
			v.Standing = Unread
		} else {
			pod, v.Standing = &st, st.Standing()
		}
	} else {
		pod = &PodState{Ready: true}
	}
	if soaking && v.Standing != Terminating {
		v.Failed = g.opts.Failed(ctx, laidAt, pod)
	}
	return v
}

// unclaimed is how long this sidecar has seen v.Want with no pod trying it (View.Unclaimed).
func (g *Gate) unclaimed(v View) time.Duration {
	rec := v.Record
	tried := rec != nil && rec.Content == v.Want &&
		(rec.State == Promoted || rec.State == Soaking && rec.First != "" && v.Now.Before(ClaimExpires(v, rec)))
	if v.Want != g.seenWant || tried {
		g.seenWant, g.unclaimedSince = v.Want, v.Now
	}
	return v.Now.Sub(g.unclaimedSince)
}

// observe notes, by this sidecar's clock, when it first saw the record's current renewal of
// its claim and each of its batch entries (View.SeenRenewed, SeenJoined); what it no longer
// holds is forgotten.
func (g *Gate) observe(rec *Record, now time.Time) (renewed time.Time, joined map[string]time.Time) {
	next := map[string]time.Time{}
	at := func(key string) time.Time {
		t, ok := g.seen[key]
		if !ok {
			t = now
		}
		next[key] = t
		return t
	}
	if rec != nil && rec.First != "" {
		renewed = at("claim\x00" + rec.First + "\x00" + rec.Renewed.String())
	}
	if rec != nil && len(rec.Batch) > 0 {
		joined = make(map[string]time.Time, len(rec.Batch))
		for pod, t := range rec.Batch {
			joined[pod] = at("batch\x00" + pod + "\x00" + t.String())
		}
	}
	g.seen = next
	return renewed, joined
}

// soaks says whether pod soaks content want now: the first pod of a content under trial, or a
// pod in the batch of a promoted one.
func soaks(rec *Record, want, pod string) bool {
	if rec == nil || rec.Content != want {
		return false
	}
	_, inBatch := rec.Batch[pod]
	return rec.State == Soaking && rec.First == pod || rec.State == Promoted && inBatch
}

// apply carries out act, failed being how the app failed on the content (Reject); it returns
// when to decide again.
func (g *Gate) apply(ctx context.Context, snap source.Snapshot, want string, rec *Record, version string, act Action, now time.Time, failed string) time.Time {
	poll := now.Add(g.opts.Poll)
	put := func(r Record) bool {
		err := g.store.Put(ctx, r, version)
		if err != nil && !errors.Is(err, ErrConflict) {
			klog.ErrorS(err, "cannot write the rollout record; trying again", "content", r.Content)
		}
		if err == nil {
			g.mu.Lock()
			g.lastRec = &r // what this pod wrote is the record now, should the next read fail
			g.mu.Unlock()
		}
		return err == nil
	}
	g.note(rec, want, act)
	keep := act.Do == Wait && rec != nil && rec.Content == want && rec.State == Soaking // another pod's to judge: never claimed here again
	if _, ok := g.rejectedHere[want]; ok && act.Do != Reject && !keep && (rec == nil || rec.Content == want) {
		// On the record now, or the record moved on (promoted by others, deleted to start
		// over): it decides from here.
		delete(g.rejectedHere, want)
		g.mu.Lock()
		kept := g.keptLocked()
		g.mu.Unlock()
		g.save(kept)
	}
	if (act.Do == Claim || act.Do == Join) && g.opts.Jitter > 0 && !supersedesOwnTrial(rec, g.opts.Pod, act) {
		if key := string(act.Do) + "@" + version; g.deferred != key {
			g.deferred, g.deferredAt = key, now.Add(jitter(rec, g.opts.Jitter))
			return g.deferredAt
		} else if now.Before(g.deferredAt) {
			return g.deferredAt
		}
	}
	switch act.Do {
	case Start:
		g.publish(snap, want, now)
		g.setGood(snap, want) // an app starts on what it has: there is nothing better to go back to
		if soaks(rec, want, g.opts.Pod) {
			g.resumed = true // a pod made again with its name (a StatefulSet's) holds the claim of its predecessor: its soak starts again
		}
		if rec != nil && rec.Content == want && rec.State == Rejected {
			g.mu.Lock()
			g.status.RunsRejected = true
			g.mu.Unlock()
			g.once("start:"+want, func() { call(g.opts.OnStartedRejected, ContentOf(snap), rec.Reason) })
		}
		return poll
	case Claim:
		g.keepPromoted(rec)
		good := g.goodContent(rec)
		takenBack := ""
		if rec != nil {
			takenBack = rec.TakenBack
		}
		if !put(Record{Content: want, State: Soaking, First: g.opts.Pod, Since: now, Renewed: now, Good: good, Duration: g.opts.Expiry, TakenBack: takenBack}) {
			return now.Add(g.opts.Sample) // another sidecar wrote first: decide again on what it wrote
		}
		g.began(ctx, now)
		g.publish(snap, want, now)
		g.soakFrom(now) // a pod that ran the content already (started on it) is judged from now
		return now.Add(g.opts.Sample)
	case Renew:
		if now.Sub(rec.Renewed) >= g.opts.Expiry/3 {
			r := *rec
			r.Renewed = now
			put(r)
		}
		return earliest(act.At, now.Add(g.opts.Sample))
	case Promote:
		r := *rec
		r.State, r.Good, r.Before, r.Renewed, r.Batch = Promoted, rec.Content, rec.Good, now, nil
		if put(r) {
			g.setGood(snap, want)
		}
		return poll
	case Reject:
		// Back to the good config first, then the record: a write lost to a conflict or an
		// outage must not keep a config this pod knows is bad (rejectedHere has the record
		// written on a later step, and keeps the content from being laid out again).
		failed = cmp.Or(failed, g.rejectedHere[want])
		g.rejectedHere[want] = failed
		r := *rec
		r.State, r.Reason, r.Renewed = Rejected, failed, now
		if rec.State == Promoted && rec.Before != "" {
			r.Good, r.TakenBack = rec.Before, rec.Content // taken back from every pod that runs it, to what it replaced
		}
		g.putBack(now, r.Good, want)
		if put(r) {
			// The Event goes once the record says so: until then the other pods may not keep theirs.
			delete(g.rejectedHere, want)
			g.released = g.stopping
			g.once("refuse:"+want, func() {}) // its own rejection, not another pod's
			g.once("reject:"+want, func() { call(g.opts.OnRejected, ContentOf(snap), failed) })
		}
		return poll
	case Join:
		r := *rec
		r.Batch = make(map[string]time.Time, len(rec.Batch)+1)
		for p, t := range rec.Batch {
			r.Batch[p] = t
		}
		r.Batch[g.opts.Pod] = now
		if put(r) {
			g.began(ctx, now)
			g.publish(snap, want, now)
			return now.Add(g.opts.Sample)
		}
		return now.Add(g.opts.Sample)
	case Leave:
		r := *rec
		r.Batch = make(map[string]time.Time, len(rec.Batch))
		for p, t := range rec.Batch {
			if p != g.opts.Pod {
				r.Batch[p] = t
			}
		}
		if put(r) {
			g.setGood(snap, want)
		}
		return poll
	case Soak:
		return earliest(act.At, now.Add(g.opts.Sample))
	case Wait:
		return earliest(act.At, poll)
	case Refuse:
		g.once("refuse:"+want, func() { call(g.opts.OnRefused, ContentOf(snap), rec.Reason) })
		return time.Time{}
	case PutBack:
		rejected := rec.TakenBack // a pod that missed that rejection
		if rec.State == Rejected {
			rejected = rec.Content
		}
		g.putBack(now, rec.Good, rejected)
		g.mu.Lock()
		stuck := g.pubID == want // started on it (a scale-up mid-soak): nothing earlier to go back to
		if stuck {
			g.status.RunsRejected = true
		}
		g.mu.Unlock()
		if stuck {
			g.once("start:"+want, func() { call(g.opts.OnStartedRejected, ContentOf(snap), rec.Reason) })
		}
		return poll
	case Release:
		r := *rec
		if r.State == Soaking && r.First == g.opts.Pod {
			r.First, r.Renewed = "", now
		}
		r.Batch = maps.Clone(rec.Batch)
		delete(r.Batch, g.opts.Pod)
		if put(r) {
			g.released = true
			klog.InfoS("this pod is being deleted or its reloader stops: gave back its turn to try the config, without a verdict", "content", want)
		}
		return poll
	case Resoak:
		r := *rec
		if r.State == Soaking && r.First == g.opts.Pod {
			r.Since, r.Renewed = now, now
		} else {
			r.Batch = maps.Clone(rec.Batch)
			r.Batch[g.opts.Pod] = now
		}
		if put(r) {
			g.resumed = false
			g.mu.Lock()
			g.laidAt = now
			g.mu.Unlock()
			g.began(ctx, now)
			klog.InfoS("the reloader restarted while this pod tried a config: its soak starts again", "content", want)
		}
		return now.Add(g.opts.Sample)
	case Follow:
		g.publish(snap, want, now)
		g.setGood(snap, want)
		klog.InfoS("this pod is not Ready, so it cannot judge a config: it follows the config the other pods promoted, without a place in the batch", "content", want)
		return poll
	}
	g.mu.Lock()
	runs := g.pubID == want
	g.mu.Unlock()
	if runs && rec != nil && rec.Content == want && rec.State == Promoted {
		g.setGood(snap, want)
	}
	return act.At // Nothing: zero, or when a claim it waits on expires
}

// supersedesOwnTrial says whether act is this pod's claim of a newer content while it tries
// one itself: it claims at once, without jitter. The pod is off the promoted config already,
// so trying the newer content there keeps one pod off it; another pod's claim would put a
// second pod on an untried content until this one put its trial back.
func supersedesOwnTrial(rec *Record, pod string, act Action) bool {
	return act.Do == Claim && rec != nil && rec.State == Soaking && rec.First == pod
}

// jitter is how long a claim or join is held back: up to most, and, over a trial under way,
// between most and twice most, so that its first pod's claim of the newer content
// (supersedesOwnTrial) reaches the others first, its own source's watch a moment behind
// theirs.
func jitter(rec *Record, most time.Duration) time.Duration {
	d := time.Duration(rand.Int64N(int64(most)))
	if rec != nil && rec.State == Soaking && rec.First != "" {
		d += most
	}
	return d
}

// soakFrom starts this pod's judgement of what it runs at now.
func (g *Gate) soakFrom(now time.Time) {
	g.mu.Lock()
	g.laidAt = now
	g.mu.Unlock()
}

func (g *Gate) began(ctx context.Context, since time.Time) {
	if g.opts.Began != nil {
		g.opts.Began(ctx, since)
	}
}

// keepPromoted makes what this pod runs its good content when the sidecars promoted it, though
// this pod's own soak of it may not be over (a newer content came): that is what a rejection
// of the newer one puts back, not an older one.
func (g *Gate) keepPromoted(rec *Record) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if rec != nil && g.pubID != "" && g.pubID != g.goodID && (rec.Good == g.pubID || rec.Content == g.pubID && rec.State == Promoted) {
		g.becomeGoodLocked(g.published, g.pubID)
	}
}

// goodContent is the content to record as the last good one when claiming a new one.
func (g *Gate) goodContent(rec *Record) string {
	switch {
	case rec == nil:
	case rec.State == Promoted:
		return rec.Content
	case rec.Good != "":
		return rec.Good
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.goodID
}

// putBack lays the last good content out again, for the reload loop to tell the app: the
// record's good content target where this pod has it, else its own last good one. A content
// rejected after its promotion that this pod took as good (rejected) goes back to the one
// before it: the record's, or this pod's own before (it took a later promotion than the one
// the record goes back to).
func (g *Gate) putBack(now time.Time, target, rejected string) {
	g.mu.Lock()
	if g.beforeID != "" && target != g.goodID && (target == g.beforeID || rejected != "" && rejected == g.goodID) {
		g.good, g.goodID = g.before, g.beforeID // the good content was rejected after all
		g.before, g.beforeID = source.Snapshot{}, ""
	}
	good, id := g.good, g.goodID
	g.mu.Unlock()
	if id == "" {
		klog.InfoS("warning: no earlier config to put back; the app keeps the rejected one")
		return
	}
	g.publish(good, id, now)
}

// publish hands s to the reload loop to lay out. What is laid out is kept first (Keep): a
// sidecar killed after the loop laid s out resumes with s, never with what it replaced.
func (g *Gate) publish(s source.Snapshot, id string, now time.Time) {
	if id == "" {
		return // nothing to lay out: SnapshotID names every snapshot, even an empty one
	}
	g.mu.Lock()
	first := g.pubID == ""
	changed := g.pubID != id
	if changed {
		g.published, g.pubID, g.laidAt = s, id, now
		g.status.Content = id
	}
	kept := g.keptLocked()
	g.mu.Unlock()
	if changed {
		g.save(kept)
		select {
		case g.changed <- struct{}{}:
		default:
		}
	}
	if first {
		close(g.synced)
	}
}

func (g *Gate) setGood(s source.Snapshot, id string) {
	g.mu.Lock()
	changed := g.goodID != id
	g.becomeGoodLocked(s, id)
	kept := g.keptLocked()
	g.mu.Unlock()
	if changed {
		g.save(kept)
	}
}

// becomeGoodLocked makes s the good content, the one it replaces the one before; g.mu is held.
func (g *Gate) becomeGoodLocked(s source.Snapshot, id string) {
	if id == g.goodID {
		return
	}
	if g.goodID != "" {
		g.before, g.beforeID = g.good, g.goodID
	}
	g.good, g.goodID = s, id
}

// keptLocked is what Keep keeps now; g.mu is held.
func (g *Gate) keptLocked() Kept {
	k := Kept{Lease: g.opts.Record, Rejected: maps.Clone(g.rejectedHere)}
	if len(k.Rejected) == 0 {
		k.Rejected = nil
	}
	if g.pubID != "" {
		snap := g.published
		k.Laid = &KeptSet{ID: g.pubID, Snapshot: &snap}
	}
	if g.goodID != "" {
		snap := g.good
		k.Good = &KeptSet{ID: g.goodID, Snapshot: &snap}
	}
	if g.beforeID != "" {
		snap := g.before
		k.Before = &KeptSet{ID: g.beforeID, Snapshot: &snap}
	}
	return k
}

// save keeps k; a failure is logged, and the sidecar goes on with what it has in memory (a
// restart then starts over, as without a kept state).
func (g *Gate) save(k Kept) {
	if g.opts.Keep == nil || k.Laid == nil {
		return
	}
	if err := g.opts.Keep.Save(k); err != nil {
		klog.ErrorS(err, "cannot keep what this pod laid out beside the config; a restart of the reloader would lay out the newest config over it")
	}
}

// resume takes up the kept state of this sidecar's last run in this pod: what it laid out is
// what it has (published at once, so the reload loop lays out nothing else), and a soak it was
// in starts again.
func (g *Gate) resume(now time.Time) {
	if g.opts.Keep == nil {
		return
	}
	k, ok, err := g.opts.Keep.Load()
	switch {
	case err != nil:
		klog.InfoS("warning: "+err.Error()+"; starting as a new pod does", "pod", g.opts.Pod)
		return
	case !ok:
		return
	case k.Lease != g.opts.Record:
		klog.InfoS("the kept one-first state is about other sources; starting as a new pod does", "kept", k.Lease, "lease", g.opts.Record)
		return
	}
	g.mu.Lock()
	if k.Good != nil {
		g.good, g.goodID = *k.Good.Snapshot, k.Good.ID
	}
	if k.Before != nil {
		g.before, g.beforeID = *k.Before.Snapshot, k.Before.ID
	}
	g.mu.Unlock()
	maps.Copy(g.rejectedHere, k.Rejected)
	g.resumed = true
	g.publish(*k.Laid.Snapshot, k.Laid.ID, now)
	klog.InfoS("resumed after a restart: the config laid out before it stays until the pods decide otherwise", "content", k.Laid.ID, "good", g.goodID)
}

// note keeps what /status shows.
func (g *Gate) note(rec *Record, want string, act Action) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lastRec = rec
	g.status.Doing = act.Do
	g.status.Waiting = ""
	if want != g.pubID {
		g.status.Waiting = want
	}
	if rec != nil {
		g.status.State, g.status.First, g.status.Reason = rec.State, rec.First, rec.Reason
	}
	if g.pubID != "" && rec != nil && rec.Content == g.pubID && rec.State != Rejected {
		g.status.RunsRejected = false
	}
}

func (g *Gate) once(key string, f func()) {
	g.mu.Lock()
	done := g.told[key]
	g.told[key] = true
	g.mu.Unlock()
	if !done {
		f()
	}
}

func call(f func(Content, string), c Content, reason string) {
	if f != nil {
		f(c, reason)
	}
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// SnapshotID is the ContentID of a snapshot from the API source: its objects' identities
// and resourceVersions (Object.Version), and the named objects missing; never "".
func SnapshotID(s source.Snapshot) string {
	vs := make([]Version, 0, len(s.Objects)+len(s.Missing))
	for _, o := range s.Objects {
		vs = append(vs, Version{Kind: string(o.Kind), Namespace: o.Namespace, Name: o.Name, ResourceVersion: o.Version})
	}
	for _, m := range s.Missing {
		vs = append(vs, Version{Kind: string(m.Kind), Namespace: m.Namespace, Name: m.Name, ResourceVersion: "missing"})
	}
	return ContentID(vs) // a selector that matches nothing is a content too: no files
}

// Describe says in one line where a rejected content stands, for Events and logs, and how to
// try it again.
func Describe(c Content, reason string) string {
	return fmt.Sprintf("config %s (content %s) was rejected by --rollout=one-first: %s; the other pods keep their config, and the next change starts over "+
		"(to try the same config again, change the object in any way, a label or an annotation will do)", c.Name, c.ID, reason)
}
