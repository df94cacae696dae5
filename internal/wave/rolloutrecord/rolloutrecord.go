// Package rolloutrecord says what became of the config rollouts wave caused: the record wave writes
// on a workload when it rolls it (Record, in the configwave.io/rollout annotation), and the
// verdict on it, read from that record and the workload's own status (Evaluate). The
// controller turns changes of verdict into Events, metrics and alerts; `wave status` prints
// the verdicts. Both read the same record, so a standby replica or a person with read access
// sees what the leader sees.
//
//	rec, _ := rolloutrecord.ParseRecord(w.Meta.Annotations[rolloutrecord.Annotation])
//	v := rolloutrecord.Evaluate(rec, w.Progress, time.Now(), 10*time.Minute)
package rolloutrecord

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/configwave/configwave/internal/wave/workload"
)

// Annotation, on the workload's metadata (a change there rolls nothing), holds the Record.
const Annotation = "configwave.io/rollout"

// Record is what wave wrote about the last rollout it caused and about missing config. It
// names objects, never values.
type Record struct {
	// Change names what the rollout carried: "configmap/app-config, secret/db".
	Change string `json:"change,omitempty"`
	// Started is when wave wrote the new template.
	Started time.Time `json:"started,omitzero"`
	// Failed says why wave judged that rollout failed (new pods crash-looping, a deadline),
	// so that `wave status` and a new leader see it; "" while it was not.
	Failed   string    `json:"failed,omitempty"`
	FailedAt time.Time `json:"failedAt,omitzero"`
	// Missing names required config that does not exist, so the workload waits for it.
	Missing      string    `json:"missing,omitempty"`
	MissingSince time.Time `json:"missingSince,omitzero"`
	// Pending names a change that waits for approval (configwave.io/approval: "manual"), and
	// PendingID identifies it: what configwave.io/approve or configwave.io/reject must say,
	// so that an approval given for one change never rolls a later one.
	Pending      string    `json:"pending,omitempty"`
	PendingID    string    `json:"pendingID,omitempty"`
	PendingSince time.Time `json:"pendingSince,omitzero"`
	// Rejected is the ID of the change last rejected: it is not asked for again.
	Rejected string `json:"rejected,omitempty"`
	// DeferredUntil: a change waits for the workload's rollout window, which opens then.
	DeferredUntil time.Time `json:"deferredUntil,omitzero"`
	// Incomplete names the sources a change waits for, whose content is incomplete (a TLS
	// Secret's certificate and key not a pair), and why; IncompleteSince is when wave first
	// saw it so, from which --source-ready-timeout counts.
	Incomplete      string    `json:"incomplete,omitempty"`
	IncompleteSince time.Time `json:"incompleteSince,omitzero"`
	// UndoneFrom is the config revision (inputs hash) of a failed rollout wave undid
	// (configwave.io/rollback-on-failure), at UndoneAt; Change and Failed say which change and
	// why. The undo's own rollout is no rollout of that change: never reported rolled out.
	UndoneFrom string    `json:"undoneFrom,omitempty"`
	UndoneAt   time.Time `json:"undoneAt,omitzero"`
}

// maxRecord bounds what is parsed: anyone who may edit the workload can write the annotation.
const maxRecord = 4096

// maxText bounds each name list kept, and so what an Event or an alert repeats of it.
const maxText = 512

// ParseRecord reads the annotation; "" is the empty Record (wave never rolled the workload).
func ParseRecord(s string) (Record, error) {
	var r Record
	if s == "" {
		return r, nil
	}
	if len(s) > maxRecord {
		return Record{}, fmt.Errorf("annotation %s has %d bytes, more than wave ever writes (%d); remove it, wave writes it again on the next rollout", Annotation, len(s), maxRecord)
	}
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return Record{}, fmt.Errorf("annotation %s is not what wave writes (%v); remove it, wave writes it again on the next rollout", Annotation, err)
	}
	r.Change, r.Missing, r.Failed, r.Pending = clean(r.Change), clean(r.Missing), clean(r.Failed), clean(r.Pending)
	r.PendingID, r.Rejected, r.Incomplete, r.UndoneFrom = clean(r.PendingID), clean(r.Rejected), clean(r.Incomplete), clean(r.UndoneFrom)
	return r, nil
}

// Clean is clean, for a text the controller writes into a record and compares with one read
// back (which ParseRecord cleans).
func Clean(s string) string { return clean(s) }

// clean keeps printable text, bounded: a hand-written record or another controller's status
// must not put control characters or pages of text into Events and alerts.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case unicode.IsPrint(r):
			return r
		case unicode.IsSpace(r): // a line break in a status message: the words stay apart
			return ' '
		}
		return -1
	}, s)
	if len(s) > maxText {
		s = strings.ToValidUTF8(s[:maxText], "") + "…"
	}
	return s
}

// String is the annotation value.
func (r Record) String() string {
	r.Change, r.Missing, r.Failed, r.Pending = clean(r.Change), clean(r.Missing), clean(r.Failed), clean(r.Pending)
	r.PendingID, r.Rejected, r.Incomplete = clean(r.PendingID), clean(r.Rejected), clean(r.Incomplete)
	b, _ := json.Marshal(r) // strings and times only: cannot fail
	return string(b)
}

// AtTemplate is the record as it stands for a workload whose template is at revision: a note
// of an undo is over once the template is at the undone revision again (kubectl rollout undo
// back to it, an Argo Rollout retried).
func (r Record) AtTemplate(revision string) Record {
	if r.UndoneFrom != "" && r.UndoneFrom == revision {
		r.UndoneFrom, r.UndoneAt = "", time.Time{}
	}
	return r
}

// State is where a workload's pods stand with its config.
type State string

const (
	UpToDate State = "up to date"                 // the pods run the current config
	Rolling  State = "rolling"                    // a rollout wave caused is under way
	Failed   State = "failed"                     // that rollout is stuck; the old pods keep serving
	Waiting  State = "waiting for missing config" // required config does not exist; nothing rolls
	// HeldBack: with config revisions, an undo put the template back at an earlier config;
	// wave rolls it forward on the next change of its config.
	HeldBack State = "held by a rollback"
	// PendingApproval: configwave.io/approval is "manual", and a change waits for a person
	// (wave status says it from the record; Evaluate judges the rollout before it).
	PendingApproval State = "waiting for approval"
	// Deferred: a change waits for the workload's rollout window (wave status says it from the
	// record).
	Deferred State = "waiting for its window"
	// Incomplete: a change waits for a source whose content is incomplete (wave status says it
	// from the record).
	Incomplete State = "waiting for a complete source"
	// What wave status says of an opted-in workload that wave has not judged (no record):
	NotRecorded State = "not recorded" // wave has not looked at it: not running, or not watching there
	FilteredOut State = "filtered out" // wave's filters (as given to wave status) leave it out
)

// Verdict is the State of one workload, since when, and why.
type Verdict struct {
	State  State     `json:"state"`
	Since  time.Time `json:"since,omitzero"`
	Change string    `json:"change,omitempty"` // what the last rollout carried
	Reason string    `json:"reason,omitempty"` // why it failed, or what is missing
}

// Evaluate judges a workload from its Record and its status. deadline is how long a rollout of
// a kind whose controller has no deadline of its own (StatefulSet, DaemonSet) may take before
// it counts as failed; 0 never fails one on time alone.
func Evaluate(rec Record, p workload.Progress, now time.Time, deadline time.Duration) Verdict {
	switch {
	case rec.Missing != "":
		return Verdict{State: Waiting, Since: rec.MissingSince, Change: rec.Change, Reason: rec.Missing + " missing"}
	case rec.Started.IsZero():
		return Verdict{State: UpToDate} // wave never rolled it: its pods started with the config
	case rec.UndoneFrom != "":
		// Its pods go back to the config before the change: not the change rolled out.
		return Verdict{State: HeldBack, Since: rec.UndoneAt, Change: rec.Change, Reason: "its rollout failed (" + rec.Failed + ") and was undone: the pods run the config before it"}
	case p.Done:
		return Verdict{State: UpToDate, Since: rec.Started, Change: rec.Change}
	case p.Failed != "":
		// Written by others (a Deployment's condition, an Argo Rollout's message, a pod's
		// reason), and repeated in Events, alerts and /status: printable and bounded.
		return Verdict{State: Failed, Since: p.FailedAt, Change: rec.Change, Reason: clean(p.Failed)}
	case rec.Failed != "":
		return Verdict{State: Failed, Since: rec.FailedAt, Change: rec.Change, Reason: rec.Failed}
	case !p.OwnDeadline && deadline > 0 && now.Sub(rec.Started) > deadline:
		return Verdict{State: Failed, Since: rec.Started.Add(deadline), Change: rec.Change,
			Reason: fmt.Sprintf("not complete %s after the change (wave's --rollout-deadline)", deadline)}
	}
	return Verdict{State: Rolling, Since: rec.Started, Change: rec.Change}
}

// DueIn is how long until a rolling workload of a kind without its own deadline fails on
// time, so the controller looks again then; 0 when nothing is due.
func DueIn(rec Record, p workload.Progress, now time.Time, deadline time.Duration) time.Duration {
	if rec.Started.IsZero() || rec.Missing != "" || p.Done || p.Failed != "" || rec.Failed != "" || p.OwnDeadline || deadline <= 0 {
		return 0
	}
	if d := rec.Started.Add(deadline).Sub(now); d > 0 {
		return d + 100*time.Millisecond
	}
	return 0
}
