// Package onefirst decides, for the reloader sidecars of one workload (--rollout=one-first),
// which pod lays out a new content of a source first, when the others follow, and when a
// content is given up: so that a config that passes the app's checker and still breaks the
// app takes down one replica, never all of them.
//
// The sidecars agree through one Record per workload and source, kept on a Lease in the
// workload's namespace and written with the API server's optimistic concurrency: every sidecar
// reads it, decides with Decide, and writes its claim only on the version it read; a sidecar
// that loses the race reads again and decides again. No controller takes part.
//
// The story of one content: the first pod to see it claims it (Soaking, itself First), lays it
// out, tells its app and watches it for the soak period, renewing the record; healthy
// throughout, it marks the content Promoted. Then the others lay it out in batches: a pod joins
// the batch while fewer than MaxUnavailable are in it, soaks the same way, and leaves it. A
// failure marks the content Rejected: the pod that failed puts its last good files back, and
// no other pod lays the content out; a failure in a batch, after the promotion, takes the
// content back from every pod that runs it, to the content promoted before it. A newer content supersedes the one under trial at any
// point; a first pod that stops renewing (deleted, killed, cut off) is replaced by the next
// pod that sees its claim expire.
//
// Decide is a pure function of what the sidecar sees; the code around it gathers the record,
// its own content and the clock, and applies the Action.
package onefirst

import (
	"cmp"
	"time"
)

// State is where a content stands among the sidecars.
type State string

const (
	// Soaking: the First pod has laid the content out and watches its app.
	Soaking State = "Soaking"
	// Promoted: the first pod's app stayed healthy; the others follow in batches.
	Promoted State = "Promoted"
	// Rejected: a pod's app failed on the content; no pod lays it out again.
	Rejected State = "Rejected"
)

// Record is what the sidecars of one workload agree on for one source.
type Record struct {
	Content string // the content under trial, promoted or rejected (ContentID)
	State   State
	First   string    // the pod that tries Content first
	Since   time.Time // when First laid Content out: its soak ends Soak later
	Renewed time.Time // First's last renewal of its claim
	// Duration is how long First's claim lives after a renewal, as First wrote it (the Lease's
	// leaseDurationSeconds; 0 where unknown: View.Expiry). Pods with another --rollout-soak
	// honour it, rather than cut the claim short by their own.
	Duration time.Duration
	Reason   string // why Content was rejected: what failed, never a config value
	// Good is the last content that was promoted: what a pod started while Content is
	// rejected should run.
	Good string
	// Before is, once Content is promoted, the Good it replaced. A pod of the batch that
	// rejects Content after its promotion sets Good back to Before, and every pod that runs
	// Content puts Before back: a rejection anywhere in the rollout takes it back everywhere,
	// as an aborted canary does.
	Before string
	// TakenBack is the last content rejected after its promotion (and taken back from the
	// pods that ran it), carried on by every claim after it: a pod that was cut off then and
	// missed the rejection, a newer content claimed over it first, still runs it and puts its
	// content before it back.
	TakenBack string
	// Batch holds the pods that laid out a promoted Content and soak it now, with the time
	// each joined.
	Batch map[string]time.Time
}

// View is what one sidecar sees when it decides.
type View struct {
	Pod    string  // this sidecar's pod
	Want   string  // the content its source holds now
	Have   string  // the content laid out in its pod now; "" before the first
	Record *Record // nil when none exists yet
	// Failed, when not empty, says how this pod's app failed since it laid out Want: not
	// Ready, the reload request refused, the health URL failing.
	Failed string
	Now    time.Time
	Soak   time.Duration // --rollout-soak
	// Expiry is how long a claim, or a place in the batch, lives without its pod: longer than
	// Soak, so that only a pod that is gone loses it.
	Expiry  time.Duration
	MaxBusy int // --rollout-max-unavailable, resolved against the replicas; at least 1
	// Standing is whether this pod can judge a config now, read from its pod where a decision
	// depends on it (a claim, a place in a batch, a soak); Able where it was not read.
	Standing Standing
	// SeenRenewed is when this sidecar first saw the record's current renewal of First's claim,
	// by its own clock; SeenJoined, likewise, each batch entry. A claim or a place expires a
	// duration after this sidecar saw it, as client-go's leader election judges a Lease: never
	// by comparing another machine's timestamp with this one's clock (a skew would make a
	// second first pod, or a timestamp in the future stall the rollout). Zero: the record's own
	// times (tests that hold the clocks alike).
	SeenRenewed time.Time
	SeenJoined  map[string]time.Time
	// Good is the last content this pod found, or saw promoted, healthy: what it puts back. A
	// pod that runs another content, which is neither that nor the record's Good, runs a trial
	// that was overtaken (a newer change superseded it, or it was rejected elsewhere): it puts
	// Good back rather than keep an unjudged content.
	Good string
	// RejectedHere: this pod rejected Want and put its good config back, and the rejection is
	// not on the record yet (the write conflicted, or the API did not answer): write it, and
	// never lay Want out again.
	RejectedHere bool
	// Resumed: this sidecar restarted while this pod soaked Want (its kept state says what it
	// had laid out): the judgement of the app restarted with it, so the soak starts again.
	Resumed bool
	// Unclaimed is how long this sidecar has seen Want with no pod trying it: a pod that is
	// not Ready claims it only when no Ready pod has for Expiry. It starts again at 0 when the
	// sidecar restarts: a restarted sidecar waits longer, never shorter.
	Unclaimed time.Duration
}

// Standing is whether a pod can judge a config: only a pod that is Ready, and not being
// deleted, can tell a config that breaks its app from its own trouble.
type Standing int

const (
	// Able: Ready and not being deleted.
	Able Standing = iota
	// NotReady: not Ready for a reason of its own (a slow start, a readiness gate, a dependency
	// down) or of the config it runs. It claims a new content only when no Ready pod has for
	// a while (every pod may be unready for want of exactly that change), and it follows a
	// promoted content without a place in the batch: it is unavailable already.
	NotReady
	// Terminating: being deleted. A draining app fails its readiness probe after SIGTERM,
	// which says nothing of the config: the pod gives back its claim or place in the batch
	// without a verdict, and takes no new content.
	Terminating
	// Unread: the pod could not be read (the API did not answer). A soak is not ended on
	// such a sample, either way: it goes on until the pod can be read.
	Unread
)

// Do is what a sidecar does next.
type Do string

const (
	// Nothing: the pod runs Want, or has nothing to do until the record changes.
	Nothing Do = "Nothing"
	// Start: the pod has no content yet: lay Want out now, whatever its state; an app cannot
	// start on none. Where Want is rejected, the pod says so (status, Event).
	Start Do = "Start"
	// Claim: write the record as Want Soaking with this pod First, then lay Want out and soak.
	Claim Do = "Claim"
	// Renew: this pod tries Want first: renew the claim, and look again at At, the soak's end.
	Renew Do = "Renew"
	// Promote: this pod's soak of Want is over and its app stayed healthy: mark Want Promoted.
	Promote Do = "Promote"
	// Reject: this pod's app failed on Want: mark it Rejected (Reason: View.Failed), put the
	// last good files back, and tell the app.
	Reject Do = "Reject"
	// Join: add this pod to the batch of promoted Want, then lay it out and soak it.
	Join Do = "Join"
	// Soak: this pod is in the batch of Want: look again at At, the soak's end.
	Soak Do = "Soak"
	// Leave: this pod's soak of promoted Want is over and healthy: leave the batch.
	Leave Do = "Leave"
	// Wait: Want is tried elsewhere, or the batch is full: look again at At.
	Wait Do = "Wait"
	// Refuse: Want was rejected and this pod does not run it: keep what it has.
	Refuse Do = "Refuse"
	// PutBack: Want was rejected and this pod runs it: lay out Record.Good, or the pod's last
	// good files, and tell the app.
	PutBack Do = "PutBack"
	// Release: this pod is being deleted while it tries Want first or in a batch: give its
	// claim or place back without a verdict, so that another pod takes it at once.
	Release Do = "Release"
	// Resoak: this pod soaks Want and its sidecar restarted meanwhile: start the soak again
	// (the claim's Since, or the place in the batch) and judge the app from now.
	Resoak Do = "Resoak"
	// Follow: Want is promoted and this pod is not Ready: lay it out without a place in the
	// batch (the pod is unavailable already), and take it as good.
	Follow Do = "Follow"
)

// Action is Decide's answer: what to do, and when to look again (zero: on the next change).
type Action struct {
	Do Do
	At time.Time
}

// Decide says what the sidecar of v.Pod does about the content v.Want.
//
// A sidecar whose source lags may claim a content older than the record's; the others then
// see a record about a content that is not theirs and claim theirs again, until every source
// holds the newest: a lag costs a claim, never a content laid out without a soak.
func Decide(v View) Action {
	r := v.Record
	switch {
	case v.Want == "":
		return Action{Do: Nothing}
	case v.Have == "":
		return Action{Do: Start}
	case v.RejectedHere && r != nil && r.Content == v.Want && (r.State == Soaking && r.First == v.Pod || r.State == Promoted && inBatch(r, v.Pod)):
		return Action{Do: Reject} // the pod put its good config back already: record why
	case v.RejectedHere && r != nil && r.Content == v.Want && r.State == Soaking:
		// Another pod took the content over while this one's rejection was unwritten (its
		// claim expired in an outage), or the claim was given back: the rejection is not this
		// pod's to write any more. It keeps its good config and claims the content no more;
		// the pod that holds the claim, or takes it, judges.
		if expires := ClaimExpires(v, r); r.First != "" && v.Now.Before(expires) {
			return Action{Do: Wait, At: expires}
		}
		return Action{Do: Wait}
	case v.RejectedHere && r != nil && r.Content != v.Want:
		return Action{Do: Nothing} // the record is about another content: keep the good config
	// Otherwise the record has moved on (rejected, promoted by others meanwhile, or deleted to
	// start over): it decides, and the gate forgets what it rejected here.
	case r == nil || r.Content != v.Want:
		if v.Have == v.Want {
			return Action{Do: Nothing} // runs it already; the record is about another content
		}
		return claim(v) // Want is newer than the record's content: it supersedes it
	}
	switch r.State {
	case Rejected:
		if v.Have == v.Want || overtaken(v, r) {
			return Action{Do: PutBack}
		}
		return Action{Do: Refuse}
	case Soaking:
		if r.First == v.Pod {
			return firstSoak(v, r)
		}
		if expires := ClaimExpires(v, r); r.First != "" && v.Now.Before(expires) {
			switch {
			case v.Have == v.Want:
				// Started on it while it is tried: look again when the claim expires, since a
				// first pod that is gone renews nothing, and nothing else would wake this one.
				return Action{Do: Nothing, At: expires}
			case overtaken(v, r):
				return Action{Do: PutBack}
			}
			return Action{Do: Wait, At: expires}
		}
		// The first pod gave its claim back or stopped renewing: take its place; a pod that runs
		// the content already (it started on it) claims it too, so that it is judged.
		return claim(v)
	case Promoted:
		if joined, ok := r.Batch[v.Pod]; ok {
			return batchSoak(v, joined)
		}
		switch {
		case v.Have == v.Want, v.Standing == Terminating:
			return Action{Do: Nothing}
		case v.Standing == NotReady:
			return Action{Do: Follow}
		case v.Standing == Unread:
			return Action{Do: Wait}
		}
		busy, next := batchLoad(v, r)
		if busy < max(v.MaxBusy, 1) {
			return Action{Do: Join}
		}
		return Action{Do: Wait, At: next}
	}
	// A state this version does not know (a newer sidecar wrote it): leave the pod as it is
	// and look again when the record changes.
	return Action{Do: Nothing}
}

// overtaken says whether the pod runs a trial of its own that a newer content overtook: neither
// its good content nor the record's. It is no one's to judge any more, so it is put back.
func overtaken(v View, r *Record) bool {
	if v.Standing == Terminating {
		return false
	}
	return v.Good != "" && v.Have != v.Good && v.Have != r.Good || r.TakenBack != "" && v.Have == r.TakenBack && r.Content != r.TakenBack
}

// claim is the step of a pod that would claim Want: only a pod that can judge it does.
func claim(v View) Action {
	switch {
	case v.Standing == Terminating:
		return Action{Do: Nothing} // its replacement starts on what the source holds
	case v.Standing == Unread:
		return Action{Do: Wait} // whether it can judge is not known: look again
	case v.Standing == NotReady && v.Unclaimed < v.Expiry:
		return Action{Do: Wait, At: v.Now.Add(v.Expiry - v.Unclaimed)}
	}
	return Action{Do: Claim}
}

func inBatch(r *Record, pod string) bool {
	_, ok := r.Batch[pod]
	return ok
}

// firstSoak is the first pod's step while it soaks Want.
func firstSoak(v View, r *Record) Action {
	switch {
	case v.Standing == Terminating:
		return Action{Do: Release}
	case v.Have != v.Want:
		return claim(v) // claimed, but not laid out (the sidecar restarted): again
	case v.Resumed:
		return Action{Do: Resoak}
	case v.Failed != "":
		return Action{Do: Reject}
	case v.Standing == Unread:
		return Action{Do: Renew} // no verdict on a sample that could not see the pod
	case !v.Now.Before(r.Since.Add(v.Soak)):
		return Action{Do: Promote}
	}
	return Action{Do: Renew, At: r.Since.Add(v.Soak)}
}

// batchSoak is a batch pod's step while it soaks promoted Want.
func batchSoak(v View, joined time.Time) Action {
	switch {
	case v.Standing == Terminating:
		return Action{Do: Release}
	case v.Have != v.Want:
		return Action{Do: Join} // joined, but not laid out (the sidecar restarted): again
	case v.Resumed:
		return Action{Do: Resoak}
	case v.Failed != "":
		return Action{Do: Reject}
	case v.Standing == Unread:
		return Action{Do: Soak}
	case !v.Now.Before(joined.Add(v.Soak)):
		return Action{Do: Leave}
	}
	return Action{Do: Soak, At: joined.Add(v.Soak)}
}

// ClaimExpires is when r's claim ends as v's sidecar judges it: the claim's duration after
// this sidecar saw its last renewal.
func ClaimExpires(v View, r *Record) time.Time {
	seen := v.SeenRenewed
	if seen.IsZero() {
		seen = r.Renewed
	}
	return seen.Add(cmp.Or(r.Duration, v.Expiry))
}

// batchLoad counts the batch's pods whose soak has not expired, and when the first of them
// will: a pod that joined and was deleted frees its place after expiry (the longer of this
// sidecar's and the record's, so that no pod's place is cut short), counted from when this
// sidecar saw it join.
func batchLoad(v View, r *Record) (int, time.Time) {
	busy := 0
	var next time.Time
	expiry := max(v.Expiry, r.Duration)
	for pod, joined := range r.Batch {
		if seen, ok := v.SeenJoined[pod]; ok {
			joined = seen
		}
		end := joined.Add(expiry)
		if !v.Now.Before(end) {
			continue
		}
		busy++
		if next.IsZero() || end.Before(next) {
			next = end
		}
	}
	return busy, next
}
