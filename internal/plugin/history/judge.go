package history

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/configwave/configwave/internal/wave/revisions"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/workload"
)

// State is what the workload itself says now, beside its revisions.
type State struct {
	// Label is the workload's configwave.io/revision label: the inputs hash wave's newest
	// rollout wrote. A template of another revision under it was put back by an undo, and
	// wave holds it there.
	Label    string
	Progress workload.Progress
	Record   rolloutrecord.Record
	// Aborted: an Argo Rollout's status.abort.
	Aborted bool
	// Writers are, for each source (Source.What), the field managers of its last writes, as
	// its managedFields keep them: one entry per manager, with the time of its last write.
	Writers map[string][]Write
}

// Write is one field manager's last write of a source.
type Write struct {
	Manager string
	At      time.Time
}

// writersIn names the managers whose last write of the source what made rev: a write kept
// after the revision before rev and no later than rev, as the API server keeps both (to the
// second), and that fits no other revision that changed the source, so that two changes in
// one second name no one rather than the wrong one. A write in the second the revision before
// was made is not counted: the source's creation is often kept in the second its workload's
// first revision was made. A manager that wrote again since has
// only its later write kept, and is not named: not known.
func writersIn(revs []Revision, rev *Revision, what string, writes []Write) string {
	prev := Replaced(revs, rev)
	if prev == nil {
		return ""
	}
	below := int64(-1) // the number by which prev came right before rev
	for _, n := range append([]int64{prev.Number}, prev.Earlier...) {
		if n < rev.Number {
			below = max(below, n)
		}
	}
	if rev.Number != below+1 || prev.Number < rev.Number && len(prev.Earlier) > 0 {
		// One between is gone, or the revision before had come back by an undo when rev was
		// made (made long before it): a write after its creation may be of the revision that
		// is gone, or of a change that was undone.
		return ""
	}
	var names []string
	for _, w := range writes {
		fits := changedAt(revs, what, w.At)
		if len(fits) == 1 && fits[0] == rev && w.At.After(prev.Created) && !slices.Contains(names, w.Manager) {
			names = append(names, w.Manager)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return ""
	}
	return " (by " + strings.Join(names, ", ") + ")"
}

// changedAt is every revision whose change of the source what a write at the time at may have
// made: one that changed its content, made no earlier than at, replacing one made no later.
func changedAt(revs []Revision, what string, at time.Time) []*Revision {
	var out []*Revision
	for i := range revs {
		r := &revs[i]
		prev := Replaced(revs, r)
		if prev == nil || at.After(r.Created) || at.Before(prev.Created) {
			continue
		}
		before, now := contentOf(prev, what), contentOf(r, what)
		if before != "" && now != "" && before != now {
			out = append(out, r)
		}
	}
	return out
}

func contentOf(rev *Revision, what string) string {
	for _, s := range rev.Config {
		if s.What() == what {
			return s.Content
		}
	}
	return ""
}

// StateOf gathers w's State.
func StateOf(w workload.Workload) State {
	st := State{Label: w.Meta.Labels[revisions.RevisionLabel], Progress: w.Progress}
	st.Record, _ = rolloutrecord.ParseRecord(w.Meta.Annotations[rolloutrecord.Annotation]) // an unreadable record says nothing
	if r, ok := w.Object.(*workload.Rollout); ok {
		st.Aborted = r.Status.Abort
	}
	return st
}

// Judge sets each revision's Outcome and Cause, from revs (oldest number first, as Revisions
// returns them) and st. The newest number is the template the workload has now: an undo gives
// the revision it goes back to the next number, as the Deployment, StatefulSet and DaemonSet
// controllers do.
func Judge(revs []Revision, st State) {
	for i := range revs {
		rev := &revs[i]
		newest := i == len(revs)-1
		// The next number went to a revision that was there before: an undo went back from it.
		next := following(revs, rev)
		undone := next != nil && cameBackOver(next, rev)
		switch {
		case newest:
			rev.Outcome = newestOutcome(rev, st)
		case undone && st.Record.Failed != "" && failedAt(st, rev):
			rev.Outcome = "failed, rolled back: " + st.Record.Failed
		case undone:
			rev.Outcome = "rolled back"
		default:
			rev.Outcome = "replaced"
		}
		rev.Cause = cause(revs, i, st)
	}
}

// failedAt says whether the record's failure is rev's: the revision wave's undo noted, or
// without such a note the one wave rolled last (a note from an earlier undo, put back on the
// workload by a later undo, names another).
func failedAt(st State, rev *Revision) bool {
	if st.Record.UndoneFrom != "" {
		return st.Record.UndoneFrom == rev.InputsHash
	}
	return st.Label == rev.InputsHash
}

func newestOutcome(rev *Revision, st State) string {
	switch {
	case st.Aborted:
		return "aborted: the canary was scaled away, the stable pods keep their config"
	case st.Record.Failed != "" && failedAt(st, rev):
		return "failed: " + st.Record.Failed
	case st.Progress.Failed != "":
		return "failed: " + st.Progress.Failed
	case st.Label != "" && st.Label != rev.InputsHash && revisions.IsRevision(st.Label):
		return fmt.Sprintf("held by an undo: wave keeps this config until a source changes (its newest rollout was %s)", st.Label)
	case st.Progress.Untracked:
		return "latest Job"
	case st.Progress.Done:
		return "rolled out"
	case st.Progress.Paused:
		return "paused"
	}
	return "rolling out"
}

// cause says what made revs[i], as far as its config and the revision it replaced tell.
func cause(revs []Revision, i int, st State) string {
	rev, newest := &revs[i], i == len(revs)-1
	for j := range revs[:i] {
		if cameBackOver(rev, &revs[j]) {
			return "an undo brought it back"
		}
	}
	prev := Replaced(revs, rev)
	if prev == nil {
		return "first revision kept"
	}
	if !revisions.IsRevision(prev.InputsHash) && revisions.IsRevision(rev.InputsHash) {
		return "revisions turned on"
	}
	var changes []string
	was := map[string]Source{}
	for _, s := range prev.Config {
		was[s.What()] = s
	}
	for _, s := range rev.Config {
		p, ok := was[s.What()]
		delete(was, s.What())
		switch {
		case !ok:
			changes = append(changes, s.What()+" added")
		case p.Content != "" && s.Content != "" && p.Content != s.Content:
			changes = append(changes, s.What()+" changed"+writersIn(revs, rev, s.What(), st.Writers[s.What()]))
		}
	}
	for _, s := range prev.Config {
		if _, ok := was[s.What()]; ok {
			changes = append(changes, s.What()+" removed")
		}
	}
	switch {
	case len(changes) > 0:
		return "config change: " + strings.Join(changes, ", ")
	case newest && st.Record.Change != "" && st.Label == rev.InputsHash:
		return "config change: " + st.Record.Change // what wave saw change, where the snapshots do not tell
	case prev.InputsHash != rev.InputsHash && !revisions.IsRevision(rev.InputsHash):
		return "config change (revisions off: which source is not kept)"
	case prev.InputsHash != rev.InputsHash && (rev.Gone != "" || prev.Gone != ""):
		return "config change (its index is gone: which source is not known)"
	}
	return "template change (not its config)"
}

// cameBackOver says whether later, of a higher number than older, was there before older: an
// undo gave it its number. Its former numbers say so where kept; else its creation, which
// the API server keeps to the second only.
func cameBackOver(later, older *Revision) bool {
	for _, n := range later.Earlier {
		if n < older.Number {
			return true
		}
	}
	return later.Created.Before(older.Created)
}

// Replaced is the revision rev replaced: the one whose number, now or before an undo brought
// it back, is the highest below rev's; nil for the first.
func Replaced(revs []Revision, rev *Revision) *Revision { return nearest(revs, rev, -1) }

// following is the revision that took the number after rev's: the one whose number, now or
// before an undo brought it back, is the lowest above rev's; nil for the newest.
func following(revs []Revision, rev *Revision) *Revision { return nearest(revs, rev, +1) }

// nearest is the revision with a number, now or before an undo, nearest to rev's on the side
// dir says (-1 below, +1 above).
func nearest(revs []Revision, rev *Revision, dir int64) *Revision {
	var best *Revision
	var bestGap int64
	for j := range revs {
		r := &revs[j]
		if r == rev {
			continue
		}
		for _, n := range append([]int64{r.Number}, r.Earlier...) {
			if gap := (n - rev.Number) * dir; gap > 0 && (best == nil || gap < bestGap) {
				best, bestGap = r, gap
			}
		}
	}
	return best
}
