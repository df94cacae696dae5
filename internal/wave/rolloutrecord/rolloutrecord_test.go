package rolloutrecord

import (
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/wave/workload"
)

func TestEvaluate(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	rolled := Record{Change: "configmap/app", Started: t0}
	const deadline = 10 * time.Minute
	for _, tc := range []struct {
		name string
		rec  Record
		p    workload.Progress
		now  time.Time
		want Verdict
	}{
		{"never rolled by wave", Record{}, workload.Progress{}, t0, Verdict{State: UpToDate}},
		{"rolling", rolled, workload.Progress{OwnDeadline: true}, t0.Add(time.Hour), Verdict{State: Rolling, Since: t0, Change: "configmap/app"}},
		{"done", rolled, workload.Progress{Done: true}, t0.Add(time.Hour), Verdict{State: UpToDate, Since: t0, Change: "configmap/app"}},
		{"the kind's controller gave up", rolled, workload.Progress{Failed: "timed out progressing", FailedAt: t0.Add(time.Minute), OwnDeadline: true}, t0.Add(time.Hour),
			Verdict{State: Failed, Since: t0.Add(time.Minute), Change: "configmap/app", Reason: "timed out progressing"}},
		{"no deadline of its own: within wave's", rolled, workload.Progress{}, t0.Add(deadline), Verdict{State: Rolling, Since: t0, Change: "configmap/app"}},
		{"no deadline of its own: past wave's", rolled, workload.Progress{}, t0.Add(deadline + time.Second),
			Verdict{State: Failed, Since: t0.Add(deadline), Change: "configmap/app", Reason: "not complete 10m0s after the change (wave's --rollout-deadline)"}},
		{"done late is still done", rolled, workload.Progress{Done: true}, t0.Add(time.Hour), Verdict{State: UpToDate, Since: t0, Change: "configmap/app"}},
		{"failed on record (new pods crash-looped)", Record{Change: "configmap/app", Started: t0, Failed: "pod app-1: container \"app\" in CrashLoopBackOff", FailedAt: t0.Add(20 * time.Second)},
			workload.Progress{OwnDeadline: true}, t0.Add(time.Minute),
			Verdict{State: Failed, Since: t0.Add(20 * time.Second), Change: "configmap/app", Reason: "pod app-1: container \"app\" in CrashLoopBackOff"}},
		{"failed on record, then done (fixed)", Record{Change: "configmap/app", Started: t0, Failed: "crash", FailedAt: t0}, workload.Progress{Done: true}, t0.Add(time.Hour),
			Verdict{State: UpToDate, Since: t0, Change: "configmap/app"}},
		{"failed and undone by wave, the undo done: held back, never the change rolled out (just restarted alike)",
			Record{Change: "configmap/app", Started: t0, Failed: "crash", FailedAt: t0, UndoneFrom: "rev-bad", UndoneAt: t0.Add(time.Minute)}, workload.Progress{Done: true}, t0.Add(time.Hour),
			Verdict{State: HeldBack, Since: t0.Add(time.Minute), Change: "configmap/app", Reason: "its rollout failed (crash) and was undone: the pods run the config before it"}},
		{"missing config", Record{Change: "configmap/app", Started: t0, Missing: "secret/db", MissingSince: t0.Add(time.Minute)}, workload.Progress{Done: true}, t0.Add(time.Hour),
			Verdict{State: Waiting, Since: t0.Add(time.Minute), Change: "configmap/app", Reason: "secret/db missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Evaluate(tc.rec, tc.p, tc.now, deadline))
		})
	}
}

func TestDueIn(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	rolled := Record{Change: "configmap/app", Started: t0}
	assert.Equal(t, 4*time.Minute+100*time.Millisecond, DueIn(rolled, workload.Progress{}, t0.Add(6*time.Minute), 10*time.Minute))
	assert.Zero(t, DueIn(rolled, workload.Progress{OwnDeadline: true}, t0, 10*time.Minute), "a Deployment reports its own deadline")
	assert.Zero(t, DueIn(rolled, workload.Progress{Done: true}, t0, 10*time.Minute))
	assert.Zero(t, DueIn(rolled, workload.Progress{}, t0.Add(11*time.Minute), 10*time.Minute), "already past: the verdict says failed")
	assert.Zero(t, DueIn(rolled, workload.Progress{}, t0, 0))
	assert.Zero(t, DueIn(Record{}, workload.Progress{}, t0, 10*time.Minute))
}

func TestRecordRoundTrip(t *testing.T) {
	r := Record{Change: "configmap/app, secret/db", Started: time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)}
	assert.Equal(t, `{"change":"configmap/app, secret/db","started":"2026-11-23T08:00:00Z"}`, r.String())
	got, err := ParseRecord(r.String())
	require.NoError(t, err)
	assert.Equal(t, r, got)

	got, err = ParseRecord("")
	require.NoError(t, err)
	assert.Equal(t, Record{}, got)
}

func TestParseRecordRefusesWhatWaveNeverWrites(t *testing.T) {
	for _, s := range []string{"not json", `{"started":"yesterday"}`, `{"change":` + strings.Repeat(`"x"`, 2000) + `}`, strings.Repeat(" ", maxRecord+1)} {
		_, err := ParseRecord(s)
		require.Error(t, err, "%.40q", s)
		assert.Contains(t, err.Error(), Annotation)
		assert.Contains(t, err.Error(), "remove it")
	}
	r, err := ParseRecord(`{"change":"configmap/a\n\u001b[31mred` + strings.Repeat("x", 1000) + `"}`)
	require.NoError(t, err)
	assert.NotContains(t, r.Change, "\n")
	assert.NotContains(t, r.Change, "\x1b")
	assert.LessOrEqual(t, len(r.Change), maxText+len("…"))
}

// A record is written by anyone who may edit the workload: parsing never panics, and what is
// kept is printable and bounded, and survives a round trip.
func FuzzParseRecord(f *testing.F) {
	f.Add(`{"change":"configmap/app","started":"2026-11-23T08:00:00Z"}`)
	f.Add(`{"missing":"secret/db","missingSince":"2026-11-23T08:00:00Z"}`)
	f.Add(`{"change":"\u0000\u00ff\ud800"}`)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRecord(s)
		if err != nil {
			return
		}
		for _, text := range []string{r.Change, r.Missing, r.Failed} {
			if len(text) > maxText+len("…") {
				t.Fatalf("kept %d bytes", len(text))
			}
			for _, c := range text {
				if !unicode.IsPrint(c) {
					t.Fatalf("kept %q", c)
				}
			}
		}
		again, err := ParseRecord(r.String())
		if err != nil {
			t.Fatalf("a record wave writes does not parse: %v", err)
		}
		if again.Change != r.Change || again.Missing != r.Missing || again.Failed != r.Failed || !again.Started.Equal(r.Started) {
			t.Fatalf("round trip changed %+v into %+v", r, again)
		}
	})
}

// A workload's status is written by others (a Deployment's condition, an Argo Rollout's
// message, a pod's waiting reason): what of it reaches Events, the webhook, /status and
// `wave status` is printable and bounded.
func TestEvaluateCleansTextFromOthers(t *testing.T) {
	started := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	rec := Record{Change: "configmap/a", Started: started}
	for _, failed := range []string{
		"stuck\x1b[31m red\r\nForged-Header: x\x00",
		strings.Repeat("long ", 10_000),
		string([]byte{0xff, 0xfe}) + "not UTF-8",
	} {
		v := Evaluate(rec, workload.Progress{Observed: true, Failed: failed, FailedAt: started}, started, 0)
		require.Equal(t, Failed, v.State)
		assert.LessOrEqual(t, len(v.Reason), maxText+len("…"))
		assert.True(t, utf8.ValidString(v.Reason))
		for _, r := range v.Reason {
			assert.True(t, unicode.IsPrint(r), "%q in %q", r, v.Reason)
		}
	}
}

// A note of an undo stands while the template is at another revision than the one undone;
// back at it (kubectl rollout undo to it, an Argo Rollout retried), the note is over.
func TestAtTemplate(t *testing.T) {
	noted := Record{Change: "configmap/app", Failed: "crash", UndoneFrom: "rev-bad", UndoneAt: time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)}
	assert.Equal(t, noted, noted.AtTemplate("rev-good"), "held at the revision before: the note stands")
	back := noted.AtTemplate("rev-bad")
	assert.Empty(t, back.UndoneFrom)
	assert.True(t, back.UndoneAt.IsZero())
	assert.Equal(t, "crash", back.Failed, "the failure is the template's again")
	assert.Equal(t, Record{}, Record{}.AtTemplate("rev-x"), "just restarted, no record: nothing")
}
