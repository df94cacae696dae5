package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/revisions"
)

// plan with revisions on (configwave.io/revisions): turning them on rolls once, every rollout
// names its revision, and an undo is held where it put the workload until the config changes.
func TestPlanRevisions(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	const key = "k1"
	v1 := confighash.Inputs{Value: "configmap/a=1", Objects: map[string]string{"configmap/a": "1"}}
	v2 := confighash.Inputs{Value: "configmap/a=2", Objects: map[string]string{"configmap/a": "2"}}
	record := func(in confighash.Inputs) string { return confighash.RecordValue(key, false, in.Value) }
	rev := func(in confighash.Inputs) string { return revisions.InputsHash(record(in)) }
	// deployment: opted in with Wave's annotation, revisions on, its pods ran v1 from the
	// revision wave made for it, and the config is now "now".
	deployment := func(now confighash.Inputs) situation {
		return situation{
			Now: t0, OptedIn: true, Wave: true, KeyID: key, Revisions: true,
			Record: record(v1), HasRecord: true, Inputs: now,
			Entries:            map[string]entry{"configmap/a": {Follows: true, InRevisions: true}},
			TemplateInputsHash: rev(v1), NewestRevision: rev(v1),
			WaveHash: func() (string, error) { return "wavehash", nil },
		}
	}
	// withTLS is s with objects now: configmap/a followed, secret/tls followed but opted out of
	// revisions (another system rotates it), configmap/other not followed.
	withTLS := func(s situation, now map[string]string) situation {
		s.Inputs = confighash.Inputs{Value: fmt.Sprint(now), Objects: now}
		s.Entries = map[string]entry{"configmap/a": {Follows: true, InRevisions: true}, "secret/tls": {Follows: true}, "configmap/other": {InRevisions: true}}
		return s
	}
	// held: rolled to v2 with tls s1 (the label and the followed label say so), then undone
	// to v1 (template and record), and the config is now "now".
	held := func(now map[string]string) situation {
		newest := withTLS(deployment(v2), map[string]string{"configmap/a": "2", "secret/tls": "s1"})
		s := withTLS(deployment(v2), now)
		s.Record = record(confighash.Inputs{Value: fmt.Sprint(map[string]string{"configmap/a": "1", "secret/tls": "s1"})})
		s.TemplateInputsHash = revisions.InputsHash(s.Record)
		s.NewestRevision = rev(newest.Inputs)
		s.NewestFollowed = newest.followedKey(s.NewestRevision)
		s.HeldBackSaid = "at " + s.TemplateInputsHash
		return s
	}
	tests := []struct {
		name  string
		s     func() situation
		check func(t *testing.T, d decision)
	}{
		{"the config unchanged, the template at its revision: nothing", func() situation { return deployment(v1) },
			func(t *testing.T, d decision) { assert.Equal(t, decision{Result: ResultUnchanged}, d) }},
		{"a change rolls to a revision of the new config, and labels the workload with it", func() situation { return deployment(v2) },
			func(t *testing.T, d decision) {
				assert.Equal(t, ResultRolled, d.Result)
				assert.Equal(t, rev(v2), d.InputsHash)
				assert.Equal(t, rev(v2), d.Revision)
				assert.False(t, d.ClearRevision)
				require.Len(t, d.Events, 1)
				assert.Equal(t, "ConfigChanged", d.Events[0].Reason)
			}},
		{"turned on for a workload whose pods run the current config: it rolls once, and says why", func() situation {
			s := deployment(v1)
			s.TemplateInputsHash, s.NewestRevision = inputsHash(record(v1)), ""
			return s
		}, func(t *testing.T, d decision) {
			assert.Equal(t, ResultRolled, d.Result)
			assert.Equal(t, rev(v1), d.InputsHash)
			assert.Equal(t, rev(v1), d.Revision)
			assert.Equal(t, revisionsTurnedOn, d.Record.Change)
			require.Len(t, d.Events, 1)
			assert.Equal(t, "ConfigRevisionsOn", d.Events[0].Reason)
			assert.Contains(t, d.Events[0].Message, "an undo to a revision from before restores its template only")
		}},
		{"a Deployment's undo: template and inputs record back at v1, the label at v2: held, said once", func() situation {
			s := deployment(v2)
			s.NewestRevision = rev(v2)
			return s
		}, func(t *testing.T, d decision) {
			assert.Equal(t, ResultRolledBack, d.Result)
			assert.Empty(t, d.Write, "nothing is written: the undo stands")
			assert.Equal(t, "at "+rev(v1), d.HeldBack)
			require.Len(t, d.Events, 1)
			assert.Equal(t, "ConfigRolledBack", d.Events[0].Reason)
			assert.Contains(t, d.Events[0].Message, "revision "+rev(v1))
			assert.Contains(t, d.Events[0].Message, "the next change of a ConfigMap or Secret it follows and keeps in its revisions rolls it")
		}},
		{"the same hold on the next look: nothing new to say", func() situation {
			s := deployment(v2)
			s.NewestRevision, s.HeldBackSaid = rev(v2), "at "+rev(v1)
			return s
		}, func(t *testing.T, d decision) {
			assert.Equal(t, decision{Result: ResultRolledBack, HeldBack: "at " + rev(v1)}, d)
		}},
		{"a StatefulSet's undo: the template back at v1, the record still at v2: held", func() situation {
			s := deployment(v2)
			s.Record, s.NewestRevision = record(v2), rev(v2)
			return s
		}, func(t *testing.T, d decision) {
			assert.Equal(t, ResultRolledBack, d.Result)
			assert.Len(t, d.Events, 1)
		}},
		{"an undo to the revision from before wave wrote any hash: held, and said", func() situation {
			s := deployment(v2)
			s.TemplateInputsHash, s.NewestRevision = "", rev(v2)
			return s
		}, func(t *testing.T, d decision) {
			assert.Equal(t, ResultRolledBack, d.Result)
			assert.Equal(t, "at ", d.HeldBack, "remembered, so said once")
			require.Len(t, d.Events, 1)
		}},
		{"an undo to the revision from before wave wrote any hash, told apart from a replace: held", func() situation {
			s := deployment(v2)
			s.TemplateInputsHash, s.NewestRevision = "", rev(v2)
			s.AtEarlierRevision = func() (bool, error) { return true, nil }
			return s
		}, func(t *testing.T, d decision) { assert.Equal(t, ResultRolledBack, d.Result) }},
		// Its ReplicaSet deleted with --cascade=orphan and made again: the garbage collector took
		// the index and snapshots the old one owned, while the pods run the revision.
		{"the current revision's index is gone from the caches a while after its rollout: made again", func() situation {
			s := deployment(v1)
			s.Rec.Started = t0.Add(-time.Hour)
			s.IndexGone = func(rev string) bool { return rev == s.TemplateInputsHash }
			return s
		}, func(t *testing.T, d decision) {
			assert.Equal(t, ResultUnchanged, d.Result)
			assert.Equal(t, rev(v1), d.Repair)
			require.Len(t, d.Events, 1)
			assert.Equal(t, "ConfigRevisionRestored", d.Events[0].Reason)
			assert.Empty(t, d.Write, "nothing of the workload is written")
		}},
		{"just restarted: the same caches and record, the same repair", func() situation {
			s := deployment(v1)
			s.Rec.Started = t0.Add(-time.Hour)
			s.HeldBackSaid = ""
			s.IndexGone = func(string) bool { return true }
			return s
		}, func(t *testing.T, d decision) { assert.Equal(t, rev(v1), d.Repair) }},
		{"the index missing from the caches right after the rollout that made it: maybe only not seen yet, looked at again once it would be", func() situation {
			s := deployment(v1)
			s.Rec.Started = t0.Add(-4 * time.Second)
			s.IndexGone = func(string) bool { return true }
			return s
		}, func(t *testing.T, d decision) {
			assert.Equal(t, decision{Result: ResultUnchanged, LookAgainIn: indexSettle - 4*time.Second}, d)
		}},
		{"the index there: nothing", func() situation {
			s := deployment(v1)
			s.Rec.Started = t0.Add(-time.Hour)
			s.IndexGone = func(string) bool { return false }
			return s
		}, func(t *testing.T, d decision) { assert.Equal(t, decision{Result: ResultUnchanged}, d) }},
		{"held at v1 by an undo, v1's index gone: not made again from today's sources, which are not v1's", func() situation {
			s := deployment(v2)
			s.Rec.Started = t0.Add(-time.Hour)
			s.NewestRevision = rev(v2)
			s.IndexGone = func(string) bool { return true }
			return s
		}, func(t *testing.T, d decision) {
			assert.Equal(t, ResultRolledBack, d.Result)
			assert.Empty(t, d.Repair)
		}},
		{"kubectl replace of a file without wave's annotation (a revision made after the newest): rolled onto the current config's revision, and said so", func() situation {
			s := deployment(v1)
			s.TemplateInputsHash = ""
			s.AtEarlierRevision = func() (bool, error) { return false, nil }
			return s
		}, func(t *testing.T, d decision) {
			assert.Equal(t, ResultRolled, d.Result)
			assert.Equal(t, rev(v1), d.InputsHash, "the current config's revision")
			assert.Empty(t, d.HeldBack)
			require.NotEmpty(t, d.Events)
			assert.Equal(t, "ConfigChanged", d.Events[0].Reason)
			assert.Contains(t, d.Events[0].Message, "no undo")
			assert.NotContains(t, d.Events[0].Message, "revisions are on")
		}},
		{"the revisions could not be listed to tell an undo from a replace: an error, looked at again", func() situation {
			s := deployment(v1)
			s.TemplateInputsHash = ""
			s.AtEarlierRevision = func() (bool, error) { return false, fmt.Errorf("forbidden") }
			return s
		}, nil},
		{"an undo to a revision from before revisions were on: held, on the live config", func() situation {
			s := deployment(v2)
			s.TemplateInputsHash, s.NewestRevision = inputsHash(record(v1)), rev(v2)
			return s
		}, func(t *testing.T, d decision) {
			assert.Equal(t, ResultRolledBack, d.Result)
			require.Len(t, d.Events, 1)
			assert.Contains(t, d.Events[0].Message, "from before its revisions were on")
		}},
		{"held at v1 by an undo, then the config changes again: it rolls forward", func() situation {
			v3 := confighash.Inputs{Value: "configmap/a=3", Objects: map[string]string{"configmap/a": "3"}}
			s := deployment(v3)
			s.NewestRevision, s.HeldBackSaid = rev(v2), "at "+rev(v1)
			return s
		}, func(t *testing.T, d decision) {
			assert.Equal(t, ResultRolled, d.Result)
			assert.True(t, revisions.IsRevision(d.Revision))
			assert.Empty(t, d.HeldBack, "the rollout ends the hold")
		}},
		{"held by an undo, then the config goes back to what the template runs: the label follows, nothing rolls", func() situation {
			s := deployment(v1) // the undo put back v1's record and template; the label says v2
			s.NewestRevision = rev(v2)
			return s
		}, func(t *testing.T, d decision) {
			assert.Equal(t, ResultUnchanged, d.Result)
			assert.Equal(t, "missing", d.Write, "a metadata write: it rolls nothing")
			assert.Equal(t, rev(v1), d.Revision, "so that v2 coming back is a change, not the undo's")
			assert.Empty(t, d.InputsHash)
		}},
		// A hold holds: only a change of an object the workload follows and keeps in its
		// revisions ends it.
		{"held at v1 by an undo, then a Secret that opts out of revisions rotates: still held", func() situation {
			s := held(map[string]string{"configmap/a": "2", "secret/tls": "s2"})
			return s
		}, func(t *testing.T, d decision) {
			assert.Equal(t, ResultRolledBack, d.Result, "not rolled forward onto the config that was undone")
			assert.Empty(t, d.Write)
		}},
		{"held at v1 by an undo, then an object it does not follow changes: still held", func() situation {
			s := held(map[string]string{"configmap/a": "2", "secret/tls": "s1", "configmap/other": "o2"})
			return s
		}, func(t *testing.T, d decision) { assert.Equal(t, ResultRolledBack, d.Result) }},
		{"held at v1 by an undo, then a followed object changes away from the undone config: it rolls", func() situation {
			return held(map[string]string{"configmap/a": "3", "secret/tls": "s2"})
		}, func(t *testing.T, d decision) {
			assert.Equal(t, ResultRolled, d.Result)
			assert.Empty(t, d.HeldBack, "the rollout ends the hold")
		}},
		{"held at v1 by an undo, then a SecretProviderClass's pods go (scaled to 0): still held", func() situation {
			s := held(map[string]string{"configmap/a": "2", "secret/tls": "s1", "secretproviderclass/vault": "absent"})
			s.Entries["secretproviderclass/vault"] = entry{Follows: true, Transient: true}
			return s
		}, func(t *testing.T, d decision) { assert.Equal(t, ResultRolledBack, d.Result) }},
		{"a followed label another revision left (a wave that writes none rolled since): not held by it", func() situation {
			s := held(map[string]string{"configmap/a": "2", "secret/tls": "s1"})
			s.NewestRevision = "rev-0123456789abcdef" // rolled by an older wave to another revision, label left
			s.Record = record(confighash.Inputs{Value: fmt.Sprint(map[string]string{"configmap/a": "1", "secret/tls": "s1"})})
			return s
		}, func(t *testing.T, d decision) { assert.Equal(t, ResultRolled, d.Result) }},
		{"held by an undo under an older wave (no followed label): a rotation rolls, as it did", func() situation {
			s := held(map[string]string{"configmap/a": "2", "secret/tls": "s2"})
			s.NewestFollowed = ""
			return s
		}, func(t *testing.T, d decision) { assert.Equal(t, ResultRolled, d.Result) }},
		{"a rollout labels the part of its config a hold compares", func() situation {
			return withTLS(deployment(v2), map[string]string{"configmap/a": "2", "secret/tls": "s1"})
		}, func(t *testing.T, d decision) {
			assert.Equal(t, ResultRolled, d.Result)
			rotated := withTLS(deployment(v2), map[string]string{"configmap/a": "2", "secret/tls": "s9"})
			other := withTLS(deployment(v2), map[string]string{"configmap/a": "9", "secret/tls": "s1"})
			assert.Equal(t, rotated.followedKey(d.Revision), d.Followed, "the opted-out Secret is no part of it")
			assert.NotEqual(t, other.followedKey(d.Revision), d.Followed, "the followed ConfigMap is")
			assert.NotEqual(t, rotated.followedKey("rev-other"), d.Followed, "nor is it another revision's")
			assert.Regexp(t, `^f-[0-9a-f]{40}$`, d.Followed, "a valid label value")
		}},
		{"an object the workload does not follow changes: nothing is written, so nothing rolls on the next look either", func() situation {
			s := withTLS(deployment(v1), map[string]string{"configmap/a": "1", "secret/tls": "s1", "configmap/other": "o2"})
			s.Entries["configmap/other"] = entry{InRevisions: true} // named in the pod spec, not followed (Reloader's annotations name others)
			s.Wave = false
			s.Stakater = true
			s.Record = record(confighash.Inputs{Value: fmt.Sprint(map[string]string{"configmap/a": "1", "secret/tls": "s1", "configmap/other": "o1"})})
			s.TemplateInputsHash, s.NewestRevision = revisions.InputsHash(s.Record), revisions.InputsHash(s.Record)
			return s
		}, func(t *testing.T, d decision) {
			assert.Equal(t, ResultUnchanged, d.Result)
			assert.Empty(t, d.Write, "the record stays what the template's revision was made of (before: a baseline, then ConfigRevisionsOn and a rollout)")
		}},
		{"a StatefulSet undone to v1 (its record still at v2), then its ConfigMap set back to v1 by hand: the record follows (written as ever), so that v2 coming back rolls", func() situation {
			s := deployment(v1)
			s.Record, s.TemplateInputsHash, s.NewestRevision = record(v2), rev(v1), rev(v2)
			s.NewestFollowed = deployment(v2).followedKey(rev(v2))
			s.CurrentHash = "wavehash" // the template's Wave hash is of the current config: the pods run it
			return s
		}, func(t *testing.T, d decision) {
			assert.Equal(t, ResultBaseline, d.Result)
			assert.Equal(t, "baseline", d.Write)
		}},
		{"revisions off for a workload that had them: its rollout takes the label off", func() situation {
			s := deployment(v2)
			s.Revisions = false
			return s
		}, func(t *testing.T, d decision) {
			assert.Equal(t, ResultRolled, d.Result)
			assert.False(t, revisions.IsRevision(d.InputsHash))
			assert.Empty(t, d.Revision)
			assert.True(t, d.ClearRevision, "an old label would later read as an undo")
		}},
		{"revisions off: the label is not looked at, an old template hash rolls nothing", func() situation {
			s := deployment(v1)
			s.Revisions, s.NewestRevision = false, rev(v2)
			return s
		}, func(t *testing.T, d decision) { assert.Equal(t, decision{Result: ResultUnchanged}, d) }},
		{"dry run: turning on would roll, and the Event says it would", func() situation {
			s := deployment(v1)
			s.TemplateInputsHash, s.NewestRevision, s.DryRun = inputsHash(record(v1)), "", true
			return s
		}, func(t *testing.T, d decision) {
			require.Len(t, d.Events, 1)
			assert.Contains(t, d.Events[0].Message, "dry run: would roll")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := plan(tc.s())
			if tc.check == nil { // the decision cannot be made: an error, nothing written
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			tc.check(t, d)
		})
	}
}

func TestRevisionsOn(t *testing.T) {
	for _, tc := range []struct {
		name       string
		flag       bool
		annotation string
		inPlace    bool
		want       bool
		problemHas string
	}{
		{"off by default", false, "", false, false, ""},
		{"--config-revisions", true, "", false, true, ""},
		{"the workload's annotation", false, "true", false, true, ""},
		{"the annotation turns the flag's choice off", true, "false", false, false, ""},
		{"a value that is no boolean leaves the flag's choice, and says so", true, "yes please", false, true, `"yes please" is not true or false`},
		{"restarted in place: off, and says why", false, "true", true, false, "rollout-strategy: restart"},
		{"restarted in place under the flag alone: off, and says why", true, "", true, false, "rollout-strategy: restart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			on, problem := revisionsOn(tc.flag, tc.annotation, tc.inPlace)
			assert.Equal(t, tc.want, on)
			if tc.problemHas == "" {
				assert.Empty(t, problem)
			} else {
				assert.Contains(t, problem, tc.problemHas)
			}
		})
	}
}
