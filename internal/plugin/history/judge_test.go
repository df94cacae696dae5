package history

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/rolloutrecord"
	"github.com/configwave/configwave/internal/wave/workload"
)

const (
	revA = "rev-aaaaaaaaaaaaaaaa"
	revB = "rev-bbbbbbbbbbbbbbbb"
	revC = "rev-cccccccccccccccc"
)

var t0 = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)

func app(content string) Source {
	return Source{Ref: configref.Ref{Kind: configref.ConfigMap, Namespace: "shop", Name: "app"}, Snapshot: "app-" + content, Content: content}
}

func rev(n int64, created int, hash string, config ...Source) Revision {
	return Revision{Number: n, Created: t0.Add(time.Duration(created) * time.Minute), InputsHash: hash, Config: config}
}

func TestJudge(t *testing.T) {
	db := Source{Ref: configref.Ref{Kind: configref.Secret, Namespace: "shop", Name: "db"}, Live: "not kept"}
	type want struct{ outcome, cause string }
	for _, tc := range []struct {
		name string
		revs []Revision
		st   State
		want []want
	}{{
		name: "a change rolled out",
		revs: []Revision{rev(1, 0, "wave-hash", Source{Ref: app("").Ref, Live: "revisions were off"}), rev(2, 1, revA, app("1111")), rev(3, 2, revB, app("2222"))},
		st:   State{Label: revB, Progress: workload.Progress{Done: true}},
		want: []want{{"replaced", "first revision kept"}, {"replaced", "revisions turned on"}, {"rolled out", "config change: configmap/app changed"}},
	}, {
		name: "who changed a source, as its managedFields keep it: a write between the revision before and this one names its manager; one written again since is not known",
		revs: []Revision{rev(1, 0, revA, app("1111")), rev(2, 2, revB, app("2222")), rev(3, 4, revC, app("3333"))},
		st: State{Label: revC, Progress: workload.Progress{Done: true}, Writers: map[string][]Write{"configmap/app": {
			{Manager: "kubectl-edit", At: t0.Add(4 * time.Minute)}, // the same second as revision 3: its change
			{Manager: "helm", At: t0.Add(5 * time.Minute)},         // after every revision: no change of theirs
			{Manager: "before-all", At: t0.Add(-time.Minute)},
		}}},
		want: []want{{"replaced", "first revision kept"}, {"replaced", "config change: configmap/app changed"}, {"rolled out", "config change: configmap/app changed (by kubectl-edit)"}},
	}, {
		name: "two changes of a source in one second: the write fits both, so it names neither",
		revs: []Revision{rev(1, 0, revA, app("1111")), rev(2, 2, revB, app("2222")), rev(3, 2, revC, app("3333"))},
		st:   State{Label: revC, Progress: workload.Progress{Done: true}, Writers: map[string][]Write{"configmap/app": {{Manager: "kubectl-edit", At: t0.Add(2 * time.Minute)}}}},
		want: []want{{"replaced", "first revision kept"}, {"replaced", "config change: configmap/app changed"}, {"rolled out", "config change: configmap/app changed"}},
	}, {
		name: "the source's creation, kept in the second the revision before was made: not the writer of the change",
		revs: []Revision{rev(1, 0, revA, app("1111")), rev(2, 2, revB, app("2222"))},
		st:   State{Label: revB, Progress: workload.Progress{Done: true}, Writers: map[string][]Write{"configmap/app": {{Manager: "creator", At: t0}}}},
		want: []want{{"replaced", "first revision kept"}, {"rolled out", "config change: configmap/app changed"}},
	}, {
		name: "the revision before came back by an undo: who changed it since is not said (the write may be of the change undone)",
		revs: []Revision{rev(2, 0, revA, app("1111")), {Number: 3, Created: t0.Add(time.Minute), InputsHash: revB, Config: []Source{app("2222")}, Earlier: []int64{1}},
			rev(4, 3, revC, app("3333"))},
		st:   State{Label: revC, Progress: workload.Progress{Done: true}, Writers: map[string][]Write{"configmap/app": {{Manager: "kubectl-edit", At: t0.Add(2 * time.Minute)}}}},
		want: []want{{"rolled back", "config change: configmap/app changed"}, {"replaced", "an undo brought it back"}, {"rolled out", "config change: configmap/app changed"}},
	}, {
		name: "just restarted: no writers read (no access), the causes as without them",
		revs: []Revision{rev(1, 0, revA, app("1111")), rev(2, 2, revB, app("2222"))},
		st:   State{Label: revB, Progress: workload.Progress{Done: true}, Writers: map[string][]Write{"configmap/app": nil}},
		want: []want{{"replaced", "first revision kept"}, {"rolled out", "config change: configmap/app changed"}},
	}, {
		name: "wave's record names the change of the newest, where the snapshots do not tell",
		revs: []Revision{rev(1, 0, "h1", Source{Ref: app("").Ref, Live: "revisions were off"}), rev(2, 1, "h2", Source{Ref: app("").Ref, Live: "revisions were off"})},
		st:   State{Label: "h2", Record: rolloutrecord.Record{Change: "configmap/app"}},
		want: []want{{"replaced", "first revision kept"}, {"rolling out", "config change: configmap/app"}},
	}, {
		name: "a failed change undone: the old revision comes back with the next number, the failed one is rolled back",
		revs: []Revision{
			{Number: 3, Created: t0.Add(2 * time.Minute), InputsHash: revC, Config: []Source{app("3333"), db}},
			{Number: 4, Created: t0.Add(time.Minute), InputsHash: revB, Config: []Source{app("2222"), db}, Earlier: []int64{2}},
		},
		st: State{Label: revC, Record: rolloutrecord.Record{Failed: "new pods crash-looping"}, Progress: workload.Progress{Done: true}},
		want: []want{
			{"failed, rolled back: new pods crash-looping", "config change: configmap/app changed"},
			{"held by an undo: wave keeps this config until a source changes (its newest rollout was " + revC + ")", "an undo brought it back"},
		},
	}, {
		name: "a later good change, then kubectl rollout undo back to the revision wave's undo restored: the note it carries names the old failure, not this revision's",
		revs: []Revision{
			{Number: 5, Created: t0.Add(4 * time.Minute), InputsHash: revC, Config: []Source{app("3333")}},
			{Number: 6, Created: t0.Add(time.Minute), InputsHash: revA, Config: []Source{app("1111")}, Earlier: []int64{4}},
		},
		st: State{Label: revC, Record: rolloutrecord.Record{Failed: "crash-looping", UndoneFrom: revB}, Progress: workload.Progress{Done: true}},
		want: []want{{"rolled back", "config change: configmap/app changed"},
			{"held by an undo: wave keeps this config until a source changes (its newest rollout was " + revC + ")", "an undo brought it back"}},
	}, {
		name: "kubectl rollout undo of a good change, wave just restarted: the labels and record alone say it",
		revs: []Revision{
			{Number: 3, Created: t0.Add(2 * time.Minute), InputsHash: revB, Config: []Source{app("2222")}},
			{Number: 4, Created: t0.Add(time.Minute), InputsHash: revA, Config: []Source{app("1111")}, Earlier: []int64{2}},
		},
		st: State{Label: revB, Progress: workload.Progress{Done: true}},
		want: []want{{"rolled back", "config change: configmap/app changed"},
			{"held by an undo: wave keeps this config until a source changes (its newest rollout was " + revB + ")", "an undo brought it back"}},
	}, {
		name: "two undos to the same revision: each change it went back from is rolled back",
		revs: []Revision{
			rev(1, 0, revA, app("0000")),
			rev(3, 2, revB, app("2222")),
			rev(5, 4, revC, app("3333")),
			{Number: 6, Created: t0.Add(time.Minute), InputsHash: revA, Config: []Source{app("1111")}, Earlier: []int64{2, 4}},
		},
		st: State{Label: revC, Progress: workload.Progress{Done: true}},
		want: []want{{"replaced", "first revision kept"}, {"rolled back", "config change: configmap/app changed"}, {"rolled back", "config change: configmap/app changed"},
			{"held by an undo: wave keeps this config until a source changes (its newest rollout was " + revC + ")", "an undo brought it back"}},
	}, {
		name: "an undo within the second: the ReplicaSet's former numbers tell it",
		revs: []Revision{rev(2, 1, revA, app("1111")), rev(3, 1, revB, app("2222")), {Number: 4, Created: t0.Add(time.Minute), InputsHash: revA, Config: []Source{app("1111")}, Earlier: []int64{2}}},
		st:   State{Label: revB, Progress: workload.Progress{Done: true}},
		want: []want{{"replaced", "first revision kept"}, {"rolled back", "config change: configmap/app changed"},
			{"held by an undo: wave keeps this config until a source changes (its newest rollout was " + revB + ")", "an undo brought it back"}},
	}, {
		name: "an undo from the newest of three changes to the first: only the newest was rolled back, each replaced the one before it",
		revs: []Revision{
			rev(1, 0, "wave-hash", Source{Ref: app("").Ref, Live: "revisions were off"}),
			{Number: 3, Created: t0, InputsHash: revB, Config: []Source{{Ref: app("").Ref, Content: "2222", Live: "its snapshots are gone"}}, Gone: "its snapshot configmap app-2222 is gone"},
			rev(4, 0, revC, app("3333")),
			{Number: 5, Created: t0, InputsHash: revA, Config: []Source{app("1111")}, Earlier: []int64{2}},
		},
		st: State{Label: revC, Progress: workload.Progress{Done: true}},
		want: []want{{"replaced", "first revision kept"}, {"replaced", "config change: configmap/app changed"}, {"rolled back", "config change: configmap/app changed"},
			{"held by an undo: wave keeps this config until a source changes (its newest rollout was " + revC + ")", "an undo brought it back"}},
	}, {
		name: "the controller's own verdict, a source added and removed",
		revs: []Revision{rev(1, 0, revA, app("1111")), rev(2, 1, revB, db)},
		st:   State{Label: revB, Progress: workload.Progress{Failed: "ProgressDeadlineExceeded"}},
		want: []want{{"replaced", "first revision kept"}, {"failed: ProgressDeadlineExceeded", "config change: secret/db added, configmap/app removed"}},
	}, {
		name: "an aborted canary",
		revs: []Revision{rev(1, 0, revA, app("1111")), rev(2, 1, revB, app("2222"))},
		st:   State{Label: revB, Aborted: true},
		want: []want{{"replaced", "first revision kept"}, {"aborted: the canary was scaled away, the stable pods keep their config", "config change: configmap/app changed"}},
	}, {
		name: "an image change keeps the config",
		revs: []Revision{rev(1, 0, revA, app("1111")), rev(2, 1, revA, app("1111"))},
		st:   State{Label: revA, Progress: workload.Progress{Paused: true}},
		want: []want{{"replaced", "first revision kept"}, {"paused", "template change (not its config)"}},
	}, {
		name: "revisions off: a change, but not which source",
		revs: []Revision{rev(1, 0, "h1"), rev(2, 1, "h2")},
		st:   State{Progress: workload.Progress{Untracked: true}},
		want: []want{{"replaced", "first revision kept"}, {"latest Job", "config change (revisions off: which source is not kept)"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			Judge(tc.revs, tc.st)
			var got []want
			for _, r := range tc.revs {
				got = append(got, want{r.Outcome, r.Cause})
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestWritesOfKeepsOnlyWhoWroteData(t *testing.T) {
	at := metav1.NewTime(t0)
	entry := func(manager, fields, sub string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Time: &at, Subresource: sub, FieldsV1: metav1.NewFieldsV1(fields)}
	}
	got := writesOf([]metav1.ManagedFieldsEntry{
		entry("helm", `{"f:data":{"f:app.conf":{}}}`, ""),
		entry("kubectl-label", `{"f:metadata":{"f:labels":{"f:team":{}}}}`, ""),
		entry("argocd", `{"f:metadata":{"f:annotations":{"f:argocd.argoproj.io/tracking-id":{}}}}`, ""),
		entry("eso", `{"f:stringData":{"f:password":{}}}`, ""),
		entry("binary", `{"f:binaryData":{"f:logo.png":{}}}`, ""),
		entry("status-writer", `{"f:data":{}}`, "status"),
	})
	var names []string
	for _, w := range got {
		names = append(names, w.Manager)
	}
	assert.Equal(t, []string{"helm", "eso", "binary"}, names, "only who wrote data: a label or an annotation changes nothing a revision keeps")
}
