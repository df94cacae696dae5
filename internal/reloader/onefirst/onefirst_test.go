package onefirst

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	soak, expiry := 30*time.Second, 45*time.Second
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	soaking := func(first string, since, renewed time.Duration) *Record {
		return &Record{Content: "new", State: Soaking, First: first, Since: at(since), Renewed: at(renewed), Good: "old"}
	}
	promoted := func(batch map[string]time.Time) *Record {
		return &Record{Content: "new", State: Promoted, First: "a", Good: "new", Batch: batch}
	}
	rejected := &Record{Content: "new", State: Rejected, First: "a", Reason: "not Ready", Good: "old"}
	for _, tc := range []struct {
		name    string
		pod     string
		want    string
		have    string
		rec     *Record
		failed  string
		now     time.Duration
		busy    int
		stand   Standing
		waited  time.Duration // View.Unclaimed
		resumed bool
		seen    time.Duration // View.SeenRenewed; 0: none
		good    string
		rejHere bool
		do      Do
		at      time.Duration // 0: no time
	}{
		{name: "nothing in the source yet", want: "", have: "", do: Nothing},
		{name: "a pod's first content is laid out at once: an app cannot start on none", want: "new", have: "", rec: soaking("a", 0, 0), do: Start},
		{name: "a new pod starts on rejected content too (and says so)", want: "new", have: "", rec: rejected, do: Start},
		{name: "a new content and no record: the first to see it claims it", want: "new", have: "old", do: Claim},
		{name: "the pod runs what its source holds", want: "new", have: "new", do: Nothing},
		{name: "a record about an older content: the newer supersedes it", want: "newer", have: "new", rec: soaking("a", 0, 0), do: Claim},
		{name: "a newer content supersedes a rejected one: it starts over", want: "newer", have: "old", rec: rejected, do: Claim},

		{name: "first: soaking, healthy: renew until the soak ends", pod: "a", want: "new", have: "new", rec: soaking("a", 0, 10*time.Second), now: 12 * time.Second, do: Renew, at: soak},
		{name: "first: the soak is over and healthy: promote", pod: "a", want: "new", have: "new", rec: soaking("a", 0, 25*time.Second), now: soak, do: Promote},
		{name: "first: its app failed: reject", pod: "a", want: "new", have: "new", rec: soaking("a", 0, 0), failed: "not Ready", now: 5 * time.Second, do: Reject},
		{name: "first: a failure at the soak's last moment still rejects", pod: "a", want: "new", have: "new", rec: soaking("a", 0, 0), failed: "503", now: 40 * time.Second, do: Reject},
		{name: "just restarted mid-soak (kept state): the soak starts again", pod: "a", want: "new", have: "new", rec: soaking("a", 0, 25*time.Second),
			failed: "", now: soak, resumed: true, do: Resoak},
		{name: "just restarted in the batch: the soak starts again", pod: "b", want: "new", have: "new",
			rec: promoted(map[string]time.Time{"b": at(31 * time.Second)}), now: 61 * time.Second, busy: 1, resumed: true, do: Resoak},
		{name: "just restarted, being deleted: gives the claim back", pod: "a", want: "new", have: "new", rec: soaking("a", 0, 0), resumed: true, stand: Terminating, do: Release},
		{name: "first: claimed but not laid out (the sidecar restarted): claim again", pod: "a", want: "new", have: "old", rec: soaking("a", 0, 0), now: 5 * time.Second, do: Claim},

		{name: "another pod soaks it: wait for its claim to end", pod: "b", want: "new", have: "old", rec: soaking("a", 0, 10*time.Second), now: 20 * time.Second, do: Wait, at: 55 * time.Second},
		{name: "the first pod stopped renewing: take its place", pod: "b", want: "new", have: "old", rec: soaking("a", 0, 10*time.Second), now: 55 * time.Second, do: Claim},
		{name: "a pod started on it while it is tried: nothing to do until the claim expires", pod: "b", want: "new", have: "new", rec: soaking("a", 0, 0), now: 5 * time.Second, do: Nothing, at: expiry},
		{name: "a pod started on it, the first pod gone without giving its claim back: claim it, to be judged", pod: "b", want: "new", have: "new", rec: soaking("a", 0, 0), now: expiry, do: Claim},

		{name: "promoted, a place in the batch: join", pod: "b", want: "new", have: "old", rec: promoted(nil), now: 31 * time.Second, busy: 1, do: Join},
		{name: "promoted, the batch is full: wait for the first place to free", pod: "c", want: "new", have: "old",
			rec: promoted(map[string]time.Time{"b": at(31 * time.Second)}), now: 40 * time.Second, busy: 1, do: Wait, at: 76 * time.Second},
		{name: "promoted, two places, one taken: join", pod: "c", want: "new", have: "old",
			rec: promoted(map[string]time.Time{"b": at(31 * time.Second)}), now: 40 * time.Second, busy: 2, do: Join},
		{name: "a batch pod gone past expiry frees its place", pod: "c", want: "new", have: "old",
			rec: promoted(map[string]time.Time{"b": at(31 * time.Second)}), now: 80 * time.Second, busy: 1, do: Join},
		{name: "max-unavailable 0 means 1", pod: "b", want: "new", have: "old", rec: promoted(nil), busy: 0, do: Join},
		{name: "in the batch: soak until its end", pod: "b", want: "new", have: "new",
			rec: promoted(map[string]time.Time{"b": at(31 * time.Second)}), now: 40 * time.Second, busy: 1, do: Soak, at: 61 * time.Second},
		{name: "in the batch, soaked and healthy: leave", pod: "b", want: "new", have: "new",
			rec: promoted(map[string]time.Time{"b": at(31 * time.Second)}), now: 61 * time.Second, busy: 1, do: Leave},
		{name: "in the batch, its app failed: reject", pod: "b", want: "new", have: "new", failed: "not Ready",
			rec: promoted(map[string]time.Time{"b": at(31 * time.Second)}), now: 45 * time.Second, busy: 1, do: Reject},
		{name: "in the batch but not laid out (restarted): join again", pod: "b", want: "new", have: "old",
			rec: promoted(map[string]time.Time{"b": at(31 * time.Second)}), now: 45 * time.Second, busy: 1, do: Join},
		{name: "promoted and laid out: nothing", pod: "d", want: "new", have: "new", rec: promoted(nil), busy: 1, do: Nothing},

		{name: "rejected, never laid out here: keep what the pod has", pod: "b", want: "new", have: "old", rec: rejected, do: Refuse},
		{name: "rejected, laid out here: put the good files back", pod: "a", want: "new", have: "new", rec: rejected, do: PutBack},

		// Only a pod that can judge a config takes part.
		{name: "a pod being deleted claims nothing: its replacement starts on what the source holds", pod: "b", want: "new", have: "old", stand: Terminating, do: Nothing},
		{name: "a pod not Ready waits for a Ready pod to claim", pod: "b", want: "new", have: "old", stand: NotReady, waited: 10 * time.Second, do: Wait, at: 35 * time.Second},
		{name: "just restarted, not Ready: it waits the whole expiry again", pod: "b", want: "new", have: "old", stand: NotReady, waited: 0, do: Wait, at: expiry},
		{name: "a pod not Ready claims once no Ready pod did for the expiry (every pod may wait for this change)", pod: "b", want: "new", have: "old", stand: NotReady, waited: expiry, do: Claim},
		{name: "the first pod, being deleted mid-soak, gives its claim back without a verdict", pod: "a", want: "new", have: "new", rec: soaking("a", 0, 0),
			failed: "the pod became not Ready", now: 5 * time.Second, stand: Terminating, do: Release},
		{name: "a claim given back is taken at once, not after expiry", pod: "b", want: "new", have: "old", rec: &Record{Content: "new", State: Soaking, Renewed: at(5 * time.Second)},
			now: 6 * time.Second, do: Claim},
		{name: "a claim given back: a pod not Ready still waits", pod: "b", want: "new", have: "old", rec: &Record{Content: "new", State: Soaking, Renewed: at(5 * time.Second)},
			now: 6 * time.Second, stand: NotReady, do: Wait, at: 6*time.Second + expiry},
		{name: "first: the pod could not be read at the soak's end: no verdict yet", pod: "a", want: "new", have: "new", rec: soaking("a", 0, 25*time.Second), now: soak, stand: Unread, do: Renew},
		{name: "in the batch, being deleted: gives its place back", pod: "b", want: "new", have: "new",
			rec: promoted(map[string]time.Time{"b": at(31 * time.Second)}), now: 45 * time.Second, busy: 1, stand: Terminating, do: Release},
		{name: "in the batch, not read at the soak's end: soak on", pod: "b", want: "new", have: "new",
			rec: promoted(map[string]time.Time{"b": at(31 * time.Second)}), now: 61 * time.Second, busy: 1, stand: Unread, do: Soak},
		{name: "promoted, this pod not Ready: it follows without a place in the batch", pod: "c", want: "new", have: "old",
			rec: promoted(map[string]time.Time{"b": at(31 * time.Second)}), now: 40 * time.Second, busy: 1, stand: NotReady, do: Follow},
		{name: "promoted, this pod being deleted: it keeps what it has", pod: "c", want: "new", have: "old", rec: promoted(nil), busy: 1, stand: Terminating, do: Nothing},

		// Time: a claim ends a duration after this sidecar saw its last renewal, by its own clock.
		{name: "a renewal stamped 10 s in the future (another clock): it expires a duration after it was seen, not later", pod: "b", want: "new", have: "old",
			rec: soaking("a", 0, 70*time.Second), seen: 10 * time.Second, now: 20 * time.Second, do: Wait, at: 55 * time.Second},
		{name: "the same, a duration after it was seen: take its place", pod: "b", want: "new", have: "old",
			rec: soaking("a", 0, 70*time.Second), seen: 10 * time.Second, now: 55 * time.Second, do: Claim},
		{name: "a renewal stamped long ago (a clock behind): the claim lives a duration after it was seen", pod: "b", want: "new", have: "old",
			rec: soaking("a", 0, -time.Hour), seen: 10 * time.Second, now: 20 * time.Second, do: Wait, at: 55 * time.Second},
		{name: "the first pod's longer duration (its longer soak) is honoured", pod: "b", want: "new", have: "old",
			rec: func() *Record { r := soaking("a", 0, 10*time.Second); r.Duration = 2 * time.Minute; return r }(), seen: 10 * time.Second, now: 60 * time.Second,
			do: Wait, at: 130 * time.Second},
		{name: "just restarted: a claim seen only now lives a whole duration from now", pod: "b", want: "new", have: "old",
			rec: soaking("a", 0, 0), seen: 100 * time.Second, now: 100 * time.Second, do: Wait, at: 145 * time.Second},

		// A pod that rejected a content and put its good one back, the record not written yet.
		{name: "rejected here, the record still says soaking: write the rejection", pod: "a", want: "new", have: "old", rec: soaking("a", 0, 0), now: 5 * time.Second,
			rejHere: true, do: Reject},
		{name: "rejected here, another pod took the claim meanwhile: not this pod's rejection to write; keep the good config while the other judges", pod: "a", want: "new", have: "old", rec: soaking("b", 0, 0), now: 5 * time.Second,
			rejHere: true, do: Wait, at: expiry},
		{name: "rejected here, the claim given back meanwhile: keep the good config, claim it no more", pod: "a", want: "new", have: "old", rec: soaking("", 0, 0), now: 5 * time.Second,
			rejHere: true, do: Wait},
		{name: "rejected here, the other pod's claim expired too: keep the good config, claim it no more", pod: "a", want: "new", have: "old", rec: soaking("b", 0, 0), now: expiry,
			rejHere: true, do: Wait},
		{name: "rejected here, in the batch of the promoted content: write the rejection", pod: "b", want: "new", have: "old",
			rec: promoted(map[string]time.Time{"b": at(31 * time.Second)}), now: 45 * time.Second, busy: 1, rejHere: true, do: Reject},
		{name: "rejected here long ago (cut off), the content promoted by others since: the record decides, the pod judges it again",
			pod: "a", want: "new", have: "old", rec: promoted(nil), busy: 1, rejHere: true, do: Join},
		{name: "rejected here, the record gone (the Lease deleted to start over): it starts over", pod: "a", want: "new", have: "old", rejHere: true, do: Claim},
		{name: "just restarted (what it rejected here is not kept): the record decides", pod: "a", want: "new", have: "old", rec: rejected, do: Refuse},

		// No content is stranded: a trial a newer content overtook is put back.
		{name: "rejected, this pod runs a trial of its own that was overtaken: put its good content back", pod: "b", want: "new", have: "mid", good: "old", rec: rejected, do: PutBack},
		{name: "rejected, this pod runs its good content: keep it", pod: "b", want: "new", have: "old", good: "old", rec: rejected, do: Refuse},
		{name: "another pod soaks a newer content; this pod's own trial was overtaken: put its good content back", pod: "b", want: "new", have: "mid", good: "old",
			rec: soaking("a", 0, 0), now: 5 * time.Second, do: PutBack},
		{name: "another pod soaks a newer content; this pod runs the last promoted one: wait", pod: "b", want: "new", have: "old", good: "older",
			rec: soaking("a", 0, 0), now: 5 * time.Second, do: Wait, at: expiry},

		{name: "a state a newer sidecar wrote: leave the pod as it is", pod: "b", want: "new", have: "old",
			rec: &Record{Content: "new", State: "Paused"}, do: Nothing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := View{Pod: tc.pod, Want: tc.want, Have: tc.have, Record: tc.rec, Failed: tc.failed,
				Now: at(tc.now), Soak: soak, Expiry: expiry, MaxBusy: tc.busy, Standing: tc.stand, Unclaimed: tc.waited, Resumed: tc.resumed, Good: tc.good, RejectedHere: tc.rejHere}
			if tc.seen != 0 {
				v.SeenRenewed = at(tc.seen)
			}
			got := Decide(v)
			want := Action{Do: tc.do}
			if tc.at != 0 {
				want.At = at(tc.at)
			}
			assert.Equal(t, want, got)
		})
	}
}
