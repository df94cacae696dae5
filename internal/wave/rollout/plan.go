package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/configwave/configwave/internal/wave/approval"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/pacing"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/window"
	"github.com/configwave/configwave/internal/wave/workload"
)

// situation is everything plan decides from for one opted-in workload; gather fills it from
// the caches. Three facts cost reads of whole objects from the API server. They are
// functions, called only on the paths that need them, so that a resync of ten thousand
// unchanged workloads reads nothing.
type situation struct {
	Now    time.Time
	DryRun bool

	OptedIn bool // in either dialect read, and not excluded by Reloader's flags

	Wave     bool // Wave's opt-in: every object the pods use rolls them; Wave's hash is written
	Stakater bool // Reloader's annotations are there
	// Reloader's --reload-on-create and --reload-on-delete, for workloads that speak only
	// Reloader's dialect.
	RollOnCreate, RollOnDelete bool

	Warnings []string // what is wrong with the workload's annotations, worded for an Event
	Warned   string   // the fingerprint of the warnings last sent for the workload; "" none

	Rec       rolloutrecord.Record // the rollout record (zero when there is none)
	Record    string               // the inputs record as it stands
	HasRecord bool
	KeyID     string // names the key the digests of Inputs are made under, or confighash.MetaID
	// CanOwnHash: the template hash of a workload that has no Wave hash to stay compatible
	// with can be wave's own, which tests no guess of a Secret value: keyed under the install
	// key, or without one made from the inputs record (not with --hash-key-file, which keys
	// every hash).
	CanOwnHash bool
	Inputs     confighash.Inputs // what the pods would see now
	// Entries says, for each object in Inputs and each one just ignored, by its entry name in
	// the record, whether a change of it rolls the workload. An entry of the old record that
	// is in neither (a reference taken out of the template) rolls Wave's workloads only.
	Entries map[string]entry

	// Wave 0.7 and later disable scheduling while config is missing (SchedulingDisabled);
	// Scheduler is the scheduler it put aside, SchedulerNow what the template has instead.
	SchedulingDisabled      bool
	Scheduler, SchedulerNow string

	CurrentHash string            // the Wave hash on the pod template
	Progress    workload.Progress // the workload's own controller's view of its rollout
	// RestartBlocked is why the workload's kind may not do now what a template write does not
	// (a CronJob suspended, or Forbid with a Job running); "" when it may.
	RestartBlocked string
	// RestartInPlace: the workload asks for its pods to be restarted without a template
	// write (an Argo Rollout with Reloader's rollout-strategy: restart).
	RestartInPlace bool
	Deadline       time.Duration // --rollout-deadline
	Pace           pacing.Hold
	// Approval: configwave.io/approval "manual" stops a rollout until that change is approved.
	Approval approval.Gate
	// Window is when a rollout may start (configwave.io/rollout-window, else --rollout-window);
	// RolloutNow: configwave.io/rollout-now "true" rolls outside it.
	Window     window.Windows
	RolloutNow bool
	// Braked are the sources the workload follows that change too often to roll for
	// (--flapping-threshold), released at BrakedUntil if they stay quiet; BrakeSaid is what the
	// last ConfigFlapping Event on the workload named.
	Braked      []string
	BrakedUntil time.Time
	BrakeSaid   string
	// Incomplete are the sources the workload follows whose content is not one a pod can
	// start on, and why ("secret/tls" → "tls.crt and tls.key are not a pair (...)"); a
	// rollout of a change of one of them waits for it at most SourceReadyTimeout
	// (--source-ready-timeout) from the record's IncompleteSince.
	Incomplete         map[string]string
	SourceReadyTimeout time.Duration

	// Revisions: the workload's pods read snapshots of their revision's config
	// (configwave.io/revisions, or --config-revisions). TemplateInputsHash is the template's
	// configwave.io/config-inputs-hash; NewestRevision the revision label wave wrote with its
	// last rollout, which an undo leaves; HeldBackSaid what the last ConfigRolledBack Event
	// was sent for (decision.HeldBack; "" none).
	Revisions                    bool
	TemplateInputsHash           string
	NewestRevision, HeldBackSaid string
	// NewestFollowed is the FollowedLabel wave wrote with NewestRevision ("" before wave wrote
	// one): what a hold compares.
	NewestFollowed string
	// AtEarlierRevision reports whether the template, which names no revision of wave's, is
	// one of the workload's revisions made before its newest: an undo's, not a kubectl replace
	// that dropped wave's annotation (nil: taken as an undo).
	AtEarlierRevision func() (bool, error)
	// IndexGone reports whether revision keeps sources in snapshots yet its index is not in
	// the caches (nil: not asked).
	IndexGone func(revision string) bool

	// WaveHash is Wave's hash of the current config (a *podrefs.MissingError when Wave's view
	// misses an object). StakaterBehind reports whether a mark Reloader left on the template
	// is older than the config, naming the object. Unkeyed is the inputs record as wave wrote
	// it before digests were keyed, made from the whole objects. EarlierWaveHash reports
	// whether CurrentHash is another Wave release line's hash of the current config.
	WaveHash func() (string, error)
	// OwnHash is wave's own template hash: WaveHash as an HMAC under the install key, or,
	// without a key, confighash.HashOfInputs of Inputs.
	OwnHash         func() (string, error)
	EarlierWaveHash func() (bool, error)
	StakaterBehind  func() (bool, string, error)
	// StakaterCurrent reports whether Reloader left a mark on the template for every named
	// object (record entry names) and each is Reloader's hash of its current data.
	StakaterCurrent func(names []string) (bool, error)
	Unkeyed         func() (confighash.Inputs, error)
	// ByMetadata is the inputs record as wave writes it without a key (confighash.MetaID),
	// made from the objects read whole: to adopt such a record once a key is there.
	ByMetadata func() (confighash.Inputs, error)
}

// entry is one object of the inputs record.
type entry struct {
	Ignored bool // configwave.io/ignore or Reloader's ignore: it leaves the record and rolls nothing
	Follows bool // a change of it rolls the workload, in the dialects it speaks
	// Transient: it is there while the pods are (a SecretProviderClass, through their
	// statuses), so only a change of it rolls, never its coming or going.
	Transient bool
	// InRevisions: a revision keeps a snapshot of it (a ConfigMap or Secret its pod spec names
	// where snapshots are read, not ignored, not opted out with configwave.io/revisions:
	// "false"). Only such an object's change ends a hold.
	InRevisions bool
}

// decision is what plan returns: what to write, what to tell, what to follow. apply performs
// it; the Events and logs of a write come after the write succeeds.
type decision struct {
	Result string
	// Write names the write, as the patches metric counts it: "" none, "baseline" and
	// "missing" (records only, which rolls nothing), "rollout" (records and pod template),
	// "scheduler" (restore the scheduler Wave disabled).
	Write      string
	Inputs     *string              // the inputs record to write; nil leaves it as it is
	Record     rolloutrecord.Record // the rollout record to write; zero removes it
	Hash       string               // Wave's hash for the template ("" leaves it: Reloader-only workloads)
	Scheduler  string               // "scheduler": the scheduler to put back ("" the default)
	InputsHash string               // our inputs hash for the template
	// Revision: write the revision label with the rollout (a revision's inputs hash), or
	// remove it (""), when the workload's revisions are off and it has one.
	Revision      string
	ClearRevision bool
	Followed      string // the FollowedLabel written with Revision
	HeldBack      string // the template hash a rollback holds the workload at, to remember
	// Repair: the revision (the template's, of the current config) whose index and snapshots
	// apply makes again from the sources: they were gone while its pods run.
	Repair string
	// LookAgainIn: look at the workload again then (an index not seen yet may only be late).
	LookAgainIn time.Duration
	// ClearApproval, ClearReject: remove configwave.io/approve or configwave.io/reject, once it
	// did what it says, or when it names another change than the one the workload stands at.
	ClearApproval, ClearReject bool
	// ChangeID identifies the change decided on, under configwave.io/approval: manual.
	ChangeID string
	// ClearRolloutNow: remove configwave.io/rollout-now with the rollout it asked for.
	ClearRolloutNow bool
	// BrakeSaid: the braked sources a ConfigFlapping Event named, to remember ("" none).
	BrakeSaid string
	// PendingSince: a change waits for approval since then (zero: none), for the gauges.
	PendingSince time.Time

	Warn   []string // InvalidAnnotation warnings to send now: the workload's warnings changed
	Warned string   // the fingerprint to remember
	Events []event  // after the write
	Log    *logLine // after the write

	HoldFor time.Duration // look again then
	Wanted  time.Time     // when the held rollout was first wanted
	Follow  bool          // follow the rollout written
	Restart bool          // what the template write does not do by itself (a CronJob's Job)
	// RestartID names this change to Restart: the same decision made again (a retry, a
	// restart of wave before the write landed) gives the same ID, so no second Job.
	RestartID string
	// RestartAt, when set, restarts the pods in place at that time instead of writing the
	// template (RestartInPlace).
	RestartAt time.Time
}

type event struct{ Type, Reason, Message string }

type logLine struct {
	V   int // 0: always
	Msg string
	KV  []any
}

// plan decides for one workload from its situation alone, in the order of docs/wave.md's rule:
//
//   - not opted in: forget it; never write to it.
//   - required config missing: an Event names it (once); no rollout, since new pods could not
//     start; a workload seen for the first time gets its inputs recorded, absent parts
//     included, so that the config's creation rolls it.
//   - a scheduler Wave 0.7+ disabled while config was missing: put it back.
//   - inputs equal to the recorded ones (resync, restart, metadata-only change): nothing.
//   - no usable record (a new workload, one adopted from Wave or Reloader): when the
//     template's Wave hash and Reloader's marks are absent or those of the current data, the
//     pods run the current config: record the inputs, which rolls nothing. Otherwise roll.
//   - inputs differ from the recorded ones in what the workload follows: the pods run old
//     config: roll (once pacing allows), with one patch that writes Wave's hash and our
//     inputs hash into the template and the inputs into metadata.
func plan(s situation) (decision, error) {
	d, err := decide(s)
	if err != nil || d.Result == ResultIgnored {
		return d, err
	}
	return s.tidyApproval(d), nil
}

func decide(s situation) (decision, error) {
	if !s.OptedIn {
		return decision{Result: ResultIgnored}, nil
	}
	warn := s.warn()
	r := s.records()
	if len(s.Inputs.Missing) > 0 {
		return warn.with(s.missing(r.value)), nil
	}
	if s.SchedulingDisabled {
		return warn.with(s.restoreScheduler()), nil
	}
	if d, held, err := s.heldByRollback(r); err != nil {
		return decision{}, err
	} else if held {
		return warn.with(d), nil
	}
	d, settled, turnOn := s.atCurrentConfig(r)
	if settled {
		return warn.with(d), nil
	}

	hash := &lazyWaveHash{s: s, own: r.writeOwn}
	what, current, log := s.turnOnChange(), false, (*logLine)(nil)
	var changed []string
	if !turnOn {
		var err error
		if what, changed, current, log, err = s.stale(r, hash); err != nil {
			return decision{}, err
		}
	}
	if current && log == unfollowedLog && r.id == s.KeyID && s.Revisions && revisions.IsRevision(s.TemplateInputsHash) && s.TemplateInputsHash == s.NewestRevision {
		// Under revisions the record is what the template's revision was made of: a change of an
		// object the workload does not follow leaves it as it is. Writing it would make the
		// template's revision look stale, and the next look roll it as if revisions had just
		// been turned on. (Adopted by a mark, or held by an undo, the record is written as ever.)
		if r.present != s.Rec {
			return warn.with(decision{Result: ResultUnchanged, Write: "missing", Record: r.present}), nil
		}
		return warn.with(decision{Result: ResultUnchanged}), nil
	}
	if current { // the pods run the current config: record it, roll nothing
		return warn.with(decision{Result: ResultBaseline, Write: "baseline", Inputs: &r.value, Record: r.present, Log: log}), nil
	}

	id := s.changeID()
	if d, braked := s.brake(what); braked {
		d.ChangeID = id // an approval given meanwhile stays for the change it names
		return warn.with(d), nil
	}
	if s.Approval.Manual && s.Approval.Approved != id && (id == s.Rec.PendingID || id == s.Rec.Rejected || id == s.Approval.Rejected) {
		// Decided already, and waiting for a person: pacing has nothing to hold.
		d, _ := s.gate(what, id)
		return warn.with(d), nil
	}
	first := s.Pace.FirstWanted
	if first.IsZero() {
		first = s.Now
	}
	if d, why := pacing.HoldFor(s.Now, first, s.Rec.Started, s.Pace); d > 0 {
		return warn.with(decision{Result: ResultHeld, HoldFor: d, Wanted: first, ChangeID: id,
			Log: &logLine{V: 2, Msg: "rollout held", KV: []any{"changed", what, "for", d.Round(time.Millisecond), "why", why}}}), nil
	}
	if d, gated := s.gate(what, id); gated {
		return warn.with(d), nil
	}
	if d, deferred := s.deferToWindow(what, id); deferred {
		return warn.with(d), nil
	}
	incomplete := s.incompleteChanged(changed)
	if d, waiting := s.waitForSources(what, id, incomplete); waiting {
		return warn.with(d), nil
	}
	h, err := hash.get()
	if err != nil {
		return decision{}, err
	}
	rollout := s.rollout(what, r.value, h)
	if incomplete != "" { // rolled all the same: past the wait, or asked to roll now
		rollout.Events = append(rollout.Events, event{corev1.EventTypeWarning, "ConfigSourceIncomplete", fmt.Sprintf(
			"rolled with %s (%s changed): waited %s (--source-ready-timeout), or %s asked to roll now; new pods may fail on it until it is complete",
			incomplete, what, s.SourceReadyTimeout, window.NowAnnotation)})
	}
	rollout.Wanted = first // held by apply if the cluster-wide limit says wait
	rollout.ChangeID = id
	return warn.with(rollout), nil
}

// revisionsTurnedOn is the change a workload rolls for once its revisions are on;
// templateReplaced the one it rolls for when, with revisions on already, its template was put
// in without wave's annotation (kubectl replace of the user's file), which is no undo.
const (
	revisionsTurnedOn = "configwave.io/revisions turned on"
	templateReplaced  = "the pod template (put in without " + InputsHashAnnotation + ")"
)

// turnOnChange is the change a workload with revisions on rolls for when its template names no
// revision of its current config: revisions turned on, or, when wave rolled one before and
// heldByRollback found no undo, a template put in by hand.
func (s situation) turnOnChange() string {
	if s.NewestRevision != "" && !revisions.IsRevision(s.TemplateInputsHash) {
		return templateReplaced
	}
	return revisionsTurnedOn
}

const replacedMessage = "the pod template names no revision (put in without " + InputsHashAnnotation + ", as kubectl replace of a file does; no undo): rolling it onto the current config's revision, so that its pods read their snapshots"

const revisionsOnMessage = "revisions are on (configwave.io/revisions): rolling out once, so that every revision from now on keeps the config it runs with; an undo to a revision from before restores its template only, on the live config"

// heldByRollback: with revisions on, the template names another revision than the one wave
// last rolled the workload to, and that one is of the current config. Only an undo (kubectl
// rollout undo, an Argo Rollouts abort or undo) or a hand's edit does that: the pods now run
// the config of that revision, from its snapshots, and wave does not roll them forward; the
// next change of the config does. A Deployment's undo also puts back the inputs record its
// revision was made with (the annotations go back with the template), the label stays.
//
// The hold lasts while the config that counts is what the newest revision was made of: the
// objects the workload follows and keeps in its revisions (NewestFollowed). A rotation of a
// Secret that opts out of revisions, or a change of an object the workload does not follow,
// leaves it held; rolling forward then would bring back the very config that was undone (with
// rollback-on-failure, an undo and a failure at every rotation).
//
// A template that names no revision of wave's is held only when it is one of the workload's
// earlier revisions (an undo to one from before revisions were on): one put in by hand without
// wave's annotation (kubectl replace) is rolled onto the current config's revision.
func (s situation) heldByRollback(r records) (decision, bool, error) {
	if !s.Revisions || s.NewestRevision == "" || s.TemplateInputsHash == s.NewestRevision {
		return decision{}, false, nil
	}
	newest := s.NewestRevision == revisions.InputsHash(r.value)
	if !newest && s.NewestFollowed != "" {
		newest = s.NewestFollowed == s.followedKey(s.NewestRevision)
	}
	if !newest {
		return decision{}, false, nil
	}
	if !revisions.IsRevision(s.TemplateInputsHash) && s.AtEarlierRevision != nil {
		earlier, err := s.AtEarlierRevision()
		if err != nil {
			return decision{}, false, fmt.Errorf("tell an undo from a replaced template: %w", err)
		}
		if !earlier {
			return decision{}, false, nil
		}
	}
	// Marked, so that a template with no inputs hash at all (a revision from before wave) is
	// remembered too.
	d := decision{Result: ResultRolledBack, HeldBack: "at " + s.TemplateInputsHash}
	if s.HeldBackSaid != d.HeldBack {
		at := "revision " + s.TemplateInputsHash + ", its config as it was"
		if !revisions.IsRevision(s.TemplateInputsHash) {
			at = "a revision from before its revisions were on, on the live config"
		}
		msg := "the pod template is back at " + at + " (a rollout undo, or an abort): wave does not roll it forward; the next change of a ConfigMap or Secret it follows and keeps in its revisions rolls it"
		d.Events = []event{{corev1.EventTypeNormal, "ConfigRolledBack", msg}}
		d.Log = &logLine{Msg: "held at an earlier config by a rollback", KV: []any{"revision", s.TemplateInputsHash, "newest", s.NewestRevision}}
	}
	return d, true, nil
}

// atCurrentConfig decides a workload whose record is of the current config: nothing to roll
// (settled, d), or turnOn (revisions on, and the template names no revision of the current
// config) for decide to roll.
func (s situation) atCurrentConfig(r records) (d decision, settled, turnOn bool) {
	if !s.HasRecord || r.id != s.KeyID || r.ownHash != r.writeOwn || r.inputs != s.Inputs.Value {
		return decision{}, false, false
	}
	want := revisions.InputsHash(r.value)
	switch {
	case s.Revisions && s.TemplateInputsHash != want:
		return decision{}, false, true
	case s.Revisions && s.NewestRevision != want:
		// Held by an undo, then the config itself went back to what the template runs: the
		// pods run the current config, and the label says so again, so that the config's
		// next change rolls (with the old label it would read as the undo's).
		return decision{Result: ResultUnchanged, Write: "missing", Record: s.Rec, Revision: want, Followed: s.followedKey(want)}, true, false
	case r.present != s.Rec: // the config is back as it was: nothing to roll
		return decision{Result: ResultUnchanged, Write: "missing", Record: r.present}, true, false
	case s.revisionGone(want):
		if wait := indexSettle - s.Now.Sub(s.Rec.Started); wait > 0 {
			return decision{Result: ResultUnchanged, LookAgainIn: wait}, true, false
		}
		return s.repair(want), true, false
	}
	return decision{Result: ResultUnchanged}, true, false
}

// indexSettle is how long after a rollout an index missing from the caches is taken as gone:
// the caches see the one wave has just made a moment after.
const indexSettle = 10 * time.Second

// revisionGone says whether the template's revision, which is the current config's (want),
// lost its index while its pods run it: its ReplicaSet deleted with --cascade=orphan and made
// again under its name, a backup restored with new uids; the garbage collector then removed
// what the old one owned. Its sources still hold the revision's content, as want says.
func (s situation) revisionGone(want string) bool {
	return s.Revisions && !s.DryRun && s.IndexGone != nil && s.TemplateInputsHash == want && s.NewestRevision == want && s.IndexGone(want)
}

// repair makes the revision's index and snapshots again from its sources (their names are of
// its content, so its pods' names find them), and says so.
func (s situation) repair(rev string) decision {
	return decision{Result: ResultUnchanged, Repair: rev, Events: []event{{corev1.EventTypeWarning, "ConfigRevisionRestored",
		"the index and snapshots of revision " + rev + " were gone while its pods run it (its ReplicaSet or ControllerRevision deleted with --cascade=orphan and made again, or restored from a backup): made again from its ConfigMaps and Secrets, which hold its content still; a pod whose container restarted meanwhile failed to start until now"}},
		Log: &logLine{Msg: "made a revision's snapshots again", KV: []any{"revision", rev}}}
}

// followedKey is FollowedLabel's value for revision with the config as it is now: a hash of
// the revision and of the digests of the objects the workload follows (in its dialects) and its
// revisions keep. The revision goes in so that a label left by another revision (written by a
// wave that kept none) never matches. Only digests go in, and only a hash comes out: the label
// tells nothing of a value.
func (s situation) followedKey(revision string) string {
	names := make([]string, 0, len(s.Inputs.Objects))
	for name := range s.Inputs.Objects {
		if e, known := s.Entries[name]; known && e.InRevisions && e.Follows && !e.Ignored && !e.Transient {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", revision)
	for _, name := range names {
		fmt.Fprintf(h, "%s=%s\n", name, s.Inputs.Objects[name])
	}
	return "f-" + hex.EncodeToString(h.Sum(nil))[:40]
}

// records is what the inputs record says, and what this look would write in its place.
type records struct {
	id, inputs string // the record's key ID and inputs value
	ownHash    bool   // the record says the template's hash is wave's own, not Wave's formula
	writeOwn   bool   // the hash this look writes is wave's own
	value      string // the inputs record to write
	present    rolloutrecord.Record
}

func (s situation) records() records {
	var r records
	r.id, r.ownHash, r.inputs = confighash.SplitRecord(s.Record)
	// Wave's hash of a Secret lets whoever reads the workload test guesses of its value. It is
	// Wave's formula only where Wave wrote one (switching rolls nothing); a workload that had
	// none when first seen gets wave's own (keyed under the install key, else made from the
	// inputs record), and its record says so from then on, whichever mode made the record.
	r.writeOwn = s.CanOwnHash && (r.ownHash || !s.HasRecord && s.CurrentHash == "")
	r.value = confighash.RecordValue(s.KeyID, r.writeOwn, s.Inputs.Value)
	r.present = s.Rec
	r.present.Missing, r.present.MissingSince = "", time.Time{}
	// What waits, or was rejected, is said again by gate while it stands: a config taken back
	// ends it, and the same change made again later is asked for again. So is a wait for the
	// rollout window.
	r.present.Pending, r.present.PendingID, r.present.PendingSince, r.present.Rejected = "", "", time.Time{}, ""
	r.present.DeferredUntil = time.Time{}
	r.present.Incomplete, r.present.IncompleteSince = "", time.Time{}
	// A note of an undo holds while the hold does (heldByRollback writes nothing): a record
	// written otherwise is after it, the failure it noted over.
	if r.present.UndoneFrom != "" {
		r.present.UndoneFrom, r.present.UndoneAt, r.present.Failed, r.present.FailedAt = "", time.Time{}, "", time.Time{}
	}
	return r
}

// gate stops a rollout of a workload with configwave.io/approval: "manual" until a person
// approves this very change (id, in configwave.io/approve); a rejected one is not rolled, and
// not asked for again while it stands. The record keeps what waits, and since when, so that a
// restarted wave, a standby, `wave status` and kubectl configwave see it; the Event is sent
// once per change.
func (s situation) gate(what, id string) (decision, bool) {
	if !s.Approval.Manual || s.Approval.Approved == id {
		return decision{}, false
	}
	rec := s.Rec
	rec.Missing, rec.MissingSince = "", time.Time{}
	rec.DeferredUntil = time.Time{} // it waits for a person first; the window is looked at once approved
	// With unkeyed digests, the ID is made from plain digests of Secret values: the record, on
	// the workload beside the inputs record, may carry it; an Event, which everyone in the
	// namespace reads, does not.
	say := id
	if s.KeyID == "" {
		say = "its ID is on the workload's configwave.io/rollout annotation, pendingID"
	}
	if s.Approval.Rejected == id || s.Rec.Rejected == id {
		rec.Pending, rec.PendingID, rec.PendingSince, rec.Rejected = "", "", time.Time{}, id
		d := decision{Result: ResultRejected, Record: rec, ChangeID: id}
		if rec != s.Rec {
			d.Write = "missing"
		}
		if s.Rec.Rejected != id {
			d.Events = []event{{corev1.EventTypeNormal, "ConfigApprovalRejected", fmt.Sprintf("the change of %s (%s) was rejected (%s): not rolled; the pods keep the config they run, and the next change asks again", what, say, approval.RejectAnnotation)}}
		}
		return d, true
	}
	if rec.PendingID != id {
		if rec.PendingID == "" { // a change replacing one that waits keeps its start: the wait is one
			rec.PendingSince = s.Now.UTC().Truncate(time.Second)
		}
		rec.Pending, rec.PendingID = what, id
	}
	d := decision{Result: ResultPendingApproval, Record: rec, PendingSince: rec.PendingSince, ChangeID: id}
	if rec != s.Rec {
		d.Write = "missing"
	}
	if s.Rec.PendingID != id {
		d.Events = []event{{corev1.EventTypeNormal, "ConfigApprovalPending", fmt.Sprintf(
			"%s changed; %s is %q, so it waits: kubectl configwave approve rolls it (annotation %s, %s), reject drops it (%s)",
			what, approval.Annotation, approval.Manual, approval.ApproveAnnotation, say, approval.RejectAnnotation)}}
		d.Log = &logLine{Msg: "rollout waits for approval", KV: []any{"changed", what}}
	}
	return d, true
}

// brake holds a rollout while a source the workload follows changes too often (a controller
// fighting another, a pipeline writing in a loop), until it has been quiet for the threshold's
// duration; configwave.io/rollout-now rolls it all the same. The Event is sent once per set of
// braked sources.
func (s situation) brake(what string) (decision, bool) {
	if len(s.Braked) == 0 || s.RolloutNow {
		return decision{}, false
	}
	names := strings.Join(s.Braked, ", ")
	d := decision{Result: ResultBraked, HoldFor: s.BrakedUntil.Sub(s.Now) + 100*time.Millisecond, Wanted: s.Now, BrakeSaid: names}
	if s.BrakeSaid != names {
		d.Events = []event{{corev1.EventTypeWarning, "ConfigFlapping", fmt.Sprintf(
			"%s changes too often (--flapping-threshold): not rolled for it until it is quiet, at %s at the earliest; the change of %s waits, and rolls then with everything since (%s: \"true\" rolls it now)",
			names, s.BrakedUntil.UTC().Format(time.RFC3339), what, window.NowAnnotation)}}
		d.Log = &logLine{Msg: "rollout braked: a source changes too often", KV: []any{"sources", names, "until", s.BrakedUntil}}
	}
	return d, true
}

// deferToWindow holds a rollout outside the workload's rollout window until it opens, unless
// configwave.io/rollout-now asks for it at once. The record says until when (once: the Event
// too), so that wave status shows it and a restarted wave does not say it again.
func (s situation) deferToWindow(what, id string) (decision, bool) {
	if s.RolloutNow {
		return decision{}, false
	}
	open, opens := s.Window.Open(s.Now)
	if open {
		return decision{}, false
	}
	rec := s.Rec
	rec.Missing, rec.MissingSince = "", time.Time{}
	rec.Pending, rec.PendingID, rec.PendingSince = "", "", time.Time{} // approved, or never gated: it waits for the window only
	rec.DeferredUntil = opens.UTC()                                    // a wait for an incomplete source goes on counting meanwhile
	d := decision{Result: ResultDeferred, Record: rec, ChangeID: id,
		HoldFor: opens.Sub(s.Now) + 100*time.Millisecond, Wanted: s.Now}
	if rec != s.Rec {
		d.Write = "missing"
	}
	if !s.Rec.DeferredUntil.Equal(rec.DeferredUntil) {
		d.Events = []event{{corev1.EventTypeNormal, "ConfigRolloutDeferred", fmt.Sprintf(
			"%s changed; outside the rollout window %q, it rolls when it opens, at %s (%s: \"true\" rolls it now)",
			what, s.Window, opens.Format(time.RFC3339), window.NowAnnotation)}}
		d.Log = &logLine{Msg: "rollout deferred to the rollout window", KV: []any{"changed", what, "opens", opens}}
	}
	return d, true
}

// waitForSources holds a rollout while a source the workload follows is incomplete (a TLS
// Secret whose certificate and key are not a pair: a renewal half-written), so that no new pod
// starts on it, for at most SourceReadyTimeout from when wave first saw it so (the record's
// IncompleteSince: a restarted wave waits no longer); then it rolls all the same, and says so.
// configwave.io/rollout-now rolls at once.
func (s situation) waitForSources(what, id, names string) (decision, bool) {
	if names == "" || s.RolloutNow || s.SourceReadyTimeout <= 0 {
		return decision{}, false
	}
	since := s.Rec.IncompleteSince
	if since.IsZero() || since.After(s.Now) {
		since = s.Now
	}
	until := since.Add(s.SourceReadyTimeout)
	if !s.Now.Before(until) {
		return decision{}, false
	}
	rec := s.Rec
	rec.Missing, rec.MissingSince = "", time.Time{}
	rec.Pending, rec.PendingID, rec.PendingSince = "", "", time.Time{}
	rec.DeferredUntil = time.Time{}
	rec.Incomplete, rec.IncompleteSince = names, since.UTC()
	d := decision{Result: ResultIncomplete, Record: rec, ChangeID: id, HoldFor: until.Sub(s.Now) + 100*time.Millisecond, Wanted: s.Now}
	if rec != s.Rec {
		d.Write = "missing"
	}
	if s.Rec.IncompleteSince.IsZero() {
		d.Events = []event{{corev1.EventTypeWarning, "ConfigSourceIncomplete", fmt.Sprintf(
			"%s changed, and %s: wave does not roll the pods onto it until it is complete, at most until %s (--source-ready-timeout); pods that start meanwhile read it live unless config revisions keep the complete one (%s: \"true\" rolls it now)",
			what, names, until.UTC().Format(time.RFC3339), window.NowAnnotation)}}
		d.Log = &logLine{Msg: "rollout waits for an incomplete source", KV: []any{"changed", what, "incomplete", names, "until", until}}
	}
	return d, true
}

// incompleteChanged names the incomplete sources (and why) among those that changed since the
// record the pods run (changed, as stale found them in the record's own terms), "; "-joined: a
// rollout waits only for a change it would carry, never for a source that was incomplete before
// and is unchanged.
func (s situation) incompleteChanged(changed []string) string {
	var names []string
	for _, name := range changed {
		if why, ok := s.Incomplete[name]; ok {
			names = append(names, name+": "+why)
		}
	}
	slices.Sort(names)
	return rolloutrecord.Clean(strings.Join(names, "; "))
}

// changeID identifies, under configwave.io/approval: manual, the change the workload stands
// at: from the inputs record its pods run to the digests of the objects it follows now (an
// object it does not follow changing leaves the ID as it is). "" when not gated.
func (s situation) changeID() string {
	if !s.Approval.Manual {
		return ""
	}
	names := make([]string, 0, len(s.Inputs.Objects))
	for name := range s.Inputs.Objects {
		if e := s.Entries[name]; e.Follows && !e.Ignored {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var to strings.Builder
	for _, name := range names {
		fmt.Fprintf(&to, "%s=%s\n", name, s.Inputs.Objects[name])
	}
	return approval.ID(s.Record, to.String())
}

// tidyApproval removes an approval or a rejection that did what it says, or that names another
// change than the one the workload stands at (its config went back, or on), so that none is
// left to decide a later change nobody looked at.
func (s situation) tidyApproval(d decision) decision {
	d.ClearApproval = d.ClearApproval || s.Approval.Approved != "" && d.Result != ResultRolled && s.Approval.Approved != d.ChangeID
	d.ClearReject = s.Approval.Rejected != "" && (d.Result == ResultRejected || s.Approval.Rejected != d.ChangeID)
	// rollout-now asks for the rollout of a change that waits: once none waits (taken back,
	// rolled meanwhile), it must not decide a later change either.
	d.ClearRolloutNow = d.ClearRolloutNow || s.RolloutNow && d.Result != ResultRolled && d.Result != ResultHeld && d.Result != ResultPendingApproval
	if (d.ClearApproval || d.ClearReject || d.ClearRolloutNow) && d.Write == "" {
		d.Write = "missing" // a metadata write of the annotations alone
		if d.Record == (rolloutrecord.Record{}) {
			d.Record = s.Rec // a decision that writes nothing leaves the record as it stands
		}
	}
	return d
}

// lazyWaveHash is Wave's hash of the current config, for a workload in Wave's dialect: computed
// only where it is written or compared (it may cost reads of whole objects), and once.
type lazyWaveHash struct {
	s      situation
	own    bool
	done   bool
	hash   string
	failed error
}

func (l *lazyWaveHash) get() (string, error) {
	if l.done || !l.s.Wave {
		return l.hash, l.failed
	}
	l.done = true
	compute := l.s.WaveHash
	if l.own {
		compute = l.s.OwnHash
	}
	h, err := compute()
	var missing *podrefs.MissingError
	switch {
	case errors.As(err, &missing):
		h = l.s.CurrentHash // Wave leaves its hash as it is when its view misses something
	case err != nil:
		l.failed = fmt.Errorf("compute the config hash: %w", err)
	}
	l.hash = h
	return l.hash, l.failed
}

// stale decides whether the pods run old config: if not (current), the line to log when the
// record is written; if so, what changed, for the log and the Event, and the objects that
// changed (changed; nil where a mark, not the record, says the pods are behind).
func (s situation) stale(r records, hash *lazyWaveHash) (what string, changed []string, current bool, log *logLine, err error) {
	pods, err := s.podsRun(r.id, r.inputs)
	if err != nil {
		return "", nil, false, nil, err
	}
	if pods.current {
		return "", nil, true, nil, nil
	}
	if !pods.byRecord {
		what, current, log, err := s.adoptedStale(hash)
		return what, nil, current, log, err
	}
	rolling := s.rolling(pods.ran, pods.now)
	if len(rolling) == 0 {
		return "", nil, true, unfollowedLog, nil
	}
	// The record is behind, but another tool may have rolled the pods meanwhile (Wave or
	// Reloader, run while wave was stopped): its mark on the template says which config the
	// pods run. When it is the current one, they run it: adopt, whatever the record held.
	marked, err := s.markedCurrent(rolling)
	if err != nil {
		return "", nil, false, nil, err
	}
	if marked {
		return "", nil, true, &logLine{Msg: "the pods already run the current config, by the template's Wave hash or Reloader's mark (another tool rolled them); recorded, nothing to roll",
			KV: []any{"changed", confighash.DescribeChanged(rolling)}}, nil
	}
	return confighash.DescribeChanged(rolling), rolling, false, nil, nil
}

// unfollowedLog is stale's word that only objects the workload does not follow changed (by
// the record): the one case a workload under revisions writes no record for (plan).
var unfollowedLog = &logLine{V: 2, Msg: "config the workload does not follow changed; recorded, nothing to roll"}

// adoptedStale decides for a workload with no usable record (new, or adopted from Wave or
// Reloader): from Wave, its hash must be Wave's of the current data; from Reloader, its marks
// must be Reloader's hashes of the current data. Then the pods run the current config.
func (s situation) adoptedStale(hash *lazyWaveHash) (what string, current bool, log *logLine, err error) {
	waveBehind := false
	if s.Wave && s.CurrentHash != "" {
		h, err := hash.get()
		if err != nil {
			return "", false, nil, err
		}
		waveBehind = s.CurrentHash != h
	}
	if waveBehind {
		// Written by another Wave release (0.6 hashed values as strings, 0.8 an empty Secret
		// as null): if it is that release's hash of the current config, the pods run it.
		earlier, err := s.EarlierWaveHash()
		if err != nil {
			return "", false, nil, fmt.Errorf("compute the config hash as earlier Wave releases did: %w", err)
		}
		waveBehind = !earlier
	}
	stBehind, why := false, ""
	if s.Stakater {
		if stBehind, why, err = s.StakaterBehind(); err != nil {
			return "", false, nil, fmt.Errorf("read the config to compare Reloader's marks: %w", err)
		}
	}
	switch {
	case waveBehind:
		return "config-hash annotation differs from the current config", false, nil, nil
	case stBehind:
		return why, false, nil, nil
	}
	return "", true, &logLine{V: 2, Msg: "recorded the config the pods run; nothing to roll"}, nil
}

// markedCurrent reports whether a mark another tool leaves on the template says the pods run
// the current config of every changed object: Wave's hash (of any release line, or wave's own)
// of the current config, or Reloader's marks of each changed object, each current. No mark
// says nothing: then the record decides.
func (s situation) markedCurrent(changed []string) (bool, error) {
	if s.Wave && s.CurrentHash != "" {
		for _, compute := range []func() (string, error){s.WaveHash, s.OwnHash} {
			h, err := compute()
			var missing *podrefs.MissingError
			switch {
			case errors.As(err, &missing):
				return false, nil // Wave's view misses an object: its hash proves nothing
			case err != nil:
				return false, fmt.Errorf("compute the config hash: %w", err)
			}
			if h == s.CurrentHash {
				return true, nil
			}
		}
		if earlier, err := s.EarlierWaveHash(); err != nil || earlier {
			return earlier, err
		}
	}
	if s.Stakater && s.StakaterCurrent != nil {
		return s.StakaterCurrent(changed)
	}
	return false, nil
}

// missing waits for required config: no rollout (new pods could not start). The rollout
// record names what is missing; a workload seen for the first time gets its inputs recorded,
// absent parts included, so that the config's creation rolls it. The warning goes when what is
// missing changes, not on every look.
func (s situation) missing(value string) decision {
	waiting := s.Rec
	names := missingNames(s.Inputs.Missing)
	if s.Rec.Missing != names {
		waiting.Missing, waiting.MissingSince = names, s.Now.UTC().Truncate(time.Second)
	}
	d := decision{Result: ResultMissing, Record: waiting}
	switch {
	case !s.HasRecord:
		d.Write, d.Inputs = "baseline", &value
	case waiting != s.Rec:
		d.Write = "missing"
	}
	if s.Rec.Missing != names {
		msg := missingMessage(s.Inputs.Missing)
		d.Events = []event{{corev1.EventTypeWarning, "ConfigMissing", msg}}
		d.Log = &logLine{V: 2, Msg: "required config missing; waiting for it", KV: []any{"missing", msg}}
	}
	return d
}

// restoreScheduler undoes what Wave 0.7 and later did to a workload whose config was missing,
// now that the config exists; the next look decides as usual.
func (s situation) restoreScheduler() decision {
	msg := fmt.Sprintf("Wave had disabled scheduling (schedulerName %q) while config was missing; the config exists: scheduler restored", s.SchedulerNow)
	d := decision{Result: ResultRolled, Write: "scheduler", Scheduler: s.Scheduler}
	if s.DryRun {
		d.Events = []event{{corev1.EventTypeNormal, "SchedulingRestored", "dry run: would do: " + msg}}
		return d
	}
	d.Events = []event{{corev1.EventTypeNormal, "SchedulingRestored", msg}}
	d.Log = &logLine{Msg: "restored the scheduler Wave had disabled", KV: []any{"scheduler", s.Scheduler}}
	return d
}

// rollout writes the records and the template, which rolls the pods.
func (s situation) rollout(what, value, hash string) decision {
	// No part of a hash is shown: Wave's hash of a Secret lets anyone who sees it test guesses
	// of the Secret's value, and Events are readable by everyone in the namespace.
	msg := what + " changed; rolling out"
	if s.DryRun {
		msg = "dry run: would roll: " + msg
	}
	next := rolloutrecord.Record{Change: what, Started: s.Now.UTC().Truncate(time.Millisecond)}
	if v := rolloutrecord.Evaluate(s.Rec, s.Progress, s.Now, s.Deadline); v.State == rolloutrecord.Rolling && s.Rec.Change != what {
		next.Change = s.Rec.Change + "; " + what // the pods that come up carry the earlier change too
	}
	d := decision{
		Result: ResultRolled, Write: "rollout", Inputs: &value, Record: next, Hash: hash, InputsHash: inputsHash(value),
		ClearRevision: s.NewestRevision != "", ClearApproval: s.Approval.Approved != "", ClearRolloutNow: s.RolloutNow,
		Events:  []event{{corev1.EventTypeNormal, "ConfigChanged", msg}},
		Log:     &logLine{Msg: "config changed; rolling out", KV: []any{"changed", what}},
		Follow:  !s.Progress.Untracked,
		Restart: true,
	}
	if s.RestartInPlace {
		// Stakater Reloader's rollout-strategy: restart. The template stays as it is; the
		// records say what the restarted pods run.
		// Argo restarts the pods created before restartAt, which is whole seconds: the next
		// whole second after the change, so that a pod started a moment before it is restarted
		// too (the second it falls in would spare it).
		d.RestartAt, d.Hash, d.InputsHash = s.Now.UTC().Truncate(time.Second).Add(time.Second), "", ""
		d.Events[0].Message += " (restarting its pods through spec.restartAt: rollout-strategy restart)"
	} else if s.Revisions {
		d.InputsHash = revisions.InputsHash(value)
		d.Revision, d.ClearRevision, d.Followed = d.InputsHash, false, s.followedKey(d.InputsHash)
		switch what {
		case revisionsTurnedOn:
			d.Events[0] = event{corev1.EventTypeNormal, "ConfigRevisionsOn", revisionsOnMessage}
		case templateReplaced:
			d.Events[0].Message = replacedMessage
		}
		if s.DryRun && (what == revisionsTurnedOn || what == templateReplaced) {
			d.Events[0].Message = "dry run: would roll: " + d.Events[0].Message
		}
	}
	switch {
	case s.DryRun:
		// Nothing is written, so nothing rolls: following it would report a rollout, and count
		// a success, that never happened.
		d.Log.Msg, d.Follow, d.Restart = "config changed; would roll out (dry run)", false, false
	case s.RestartBlocked != "":
		d.Restart = false
		d.Events = append(d.Events, event{corev1.EventTypeNormal, "JobNotStarted", "no Job started for the " + what + " change: " + s.RestartBlocked})
	default:
		// The records as they stand and the new inputs: a look tried again (a conflict, a
		// restart of wave) gives the same ID, since the records change only when the write
		// lands; after that, the same config coming back is another change, with another ID.
		d.RestartID = s.Record + "\n" + s.Rec.String() + "\n" + value
	}
	return d
}

// podsRun is what plan knows of the config the pods run.
type podsRun struct {
	current  bool              // they run the current config: record it, roll nothing
	byRecord bool              // ran holds what they run, entry by entry
	ran, now map[string]string // entry name -> digest: what they run, and what they would see
}

// podsRun reads the inputs record. A record under the current key compares entry by entry.
// One written before records named their key, before digests were keyed, or without a key
// (Secrets by their metadata) is compared in its own terms, from the objects read whole. One
// under a key wave no longer has (another install key, or one kept in a ConfigMap or a Lease
// by earlier builds, which wave no longer reads) tells nothing: the pods are judged by
// Wave's hash and Reloader's marks, as for a workload without a record.
func (s situation) podsRun(recID, recInputs string) (podsRun, error) {
	switch {
	case !s.HasRecord:
		return podsRun{}, nil
	case recID == s.KeyID:
		return podsRun{byRecord: true, ran: confighash.ParseInputs(recInputs), now: s.Inputs.Objects}, nil
	case recID == "" && recInputs == s.Inputs.Value:
		return podsRun{current: true}, nil // written under this key before records named it (--hash-key-file)
	case recID == "" || recID == confighash.MetaID:
		recompute := s.Unkeyed
		if recID == confighash.MetaID {
			recompute = s.ByMetadata
		}
		old, err := recompute()
		if err != nil {
			return podsRun{}, fmt.Errorf("read the config to adopt its inputs record: %w", err)
		}
		if old.Value == recInputs {
			return podsRun{current: true}, nil
		}
		return podsRun{byRecord: true, ran: confighash.ParseInputs(recInputs), now: old.Objects}, nil
	}
	return podsRun{}, nil
}

// rolling lists the changed entries that roll the workload. The record covers every object
// the pods use, but a Reloader workload follows only what its annotations name, and rolls on
// an object's creation or deletion only when told to (--reload-on-create, --reload-on-delete).
func (s situation) rolling(ran, now map[string]string) []string {
	var out []string
	for _, name := range confighash.Changed(ran, now) {
		before, was := ran[name]
		if !was && now[name] == "absent" {
			continue // newly named, and not there: nothing the pods see changed
		}
		created, deleted := !was || before == "absent", now[name] == "absent"
		e, known := s.Entries[name]
		if !s.Wave && (created && !s.RollOnCreate || deleted && !s.RollOnDelete) || e.Transient && (created || deleted) {
			continue
		}
		if known && !e.Ignored && e.Follows || !known && s.Wave {
			out = append(out, name)
		}
	}
	return out
}

// warnings is the InvalidAnnotation part of a decision.
type warnings struct {
	send        []string
	fingerprint string
}

// warn sends the workload's warnings when they differ from those last sent.
func (s situation) warn() warnings {
	fp := ""
	if len(s.Warnings) > 0 {
		sorted := slices.Sorted(slices.Values(s.Warnings))
		sum := sha256.Sum256([]byte(strings.Join(sorted, "\n")))
		fp = hex.EncodeToString(sum[:8])
	}
	w := warnings{fingerprint: fp}
	if fp != s.Warned {
		w.send = s.Warnings
	}
	return w
}

func (w warnings) with(d decision) decision {
	d.Warn, d.Warned = w.send, w.fingerprint
	return d
}
