// Package sidecarstate says, for kubectl configwave pods, where each pod of a workload stands in
// the one-first rollout of its reloader sidecars (--rollout=one-first), as their Lease records
// it: which pod tries a new config first, which soak it in a batch, what was rejected and why.
// The Lease is what the API holds; each sidecar's own /status says what it has laid out to the
// byte, which the plugin does not reach.
package sidecarstate

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/configwave/configwave/internal/reloader/onefirst"
	"github.com/configwave/configwave/internal/wave/workload"
)

// Label is the label the sidecars put on their Lease.
const Label = "app.kubernetes.io/managed-by=configwave-reloader"

// Records are the one-first records of the workload kind/name among leases: those named as
// onefirst.LeaseName names them (one per set of sources its sidecars watch). A Lease that cannot
// be read as one is left out: the sidecars claim over it, and it says nothing of the pods.
func Records(leases []coordinationv1.Lease, kind workload.Kind, name string) []onefirst.Record {
	if kind == workload.CronJob {
		return nil // a Job's pods agree per Job, not per CronJob
	}
	own := regexp.MustCompile("^" + regexp.QuoteMeta("configwave-"+strings.ToLower(string(kind))+"-"+name) + "-[0-9a-f]{8}$")
	var out []onefirst.Record
	for i := range leases {
		l := &leases[i]
		if !own.MatchString(l.Name) {
			continue
		}
		var holder string
		var since, renewed time.Time
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if l.Spec.AcquireTime != nil {
			since = l.Spec.AcquireTime.Time
		}
		if l.Spec.RenewTime != nil {
			renewed = l.Spec.RenewTime.Time
		}
		rec, err := onefirst.ParseRecord(l.Annotations, holder, since, renewed)
		if err == nil {
			out = append(out, *rec)
		}
	}
	return out
}

// Of says where pod stands in each record (joined by "; "), "" where there is none: what its
// sidecar runs, as far as the Lease tells. Contents are shown by the first 8 characters of
// their id, as the sidecars' logs show them; a content id hashes the sources' identities and
// versions, never their values.
func Of(recs []onefirst.Record, pod string) string {
	var out []string
	for _, r := range recs {
		out = append(out, of(r, pod))
	}
	return strings.Join(out, "; ")
}

func of(r onefirst.Record, pod string) string {
	c := short(r.Content)
	first := oneLine(r.First)
	switch r.State {
	case onefirst.Soaking:
		switch {
		case r.First == "":
			return fmt.Sprintf("keeps %s; config %s waits for a pod to try it first", orNone(r.Good), c)
		case r.First == pod:
			return fmt.Sprintf("under trial: tries config %s first, since %s", c, r.Since.UTC().Format(time.RFC3339))
		}
		return fmt.Sprintf("keeps %s while pod %s tries config %s first", orNone(r.Good), first, c)
	case onefirst.Promoted:
		if at, ok := r.Batch[pod]; ok {
			return fmt.Sprintf("under trial: soaks config %s in a batch, since %s", c, at.UTC().Format(time.RFC3339))
		}
		return fmt.Sprintf("config %s promoted: each pod takes it in its batch (this one has it, or waits for its turn)", c)
	case onefirst.Rejected:
		why := ""
		if r.Reason != "" {
			why = " (" + oneLine(r.Reason) + ")"
		}
		if r.TakenBack == r.Content {
			// Rejected by a pod of a batch after the promotion: the record keeps the first
			// pod, which was healthy on it, not the one that rejected it.
			return fmt.Sprintf("rejected after its promotion, on a pod of a batch: config %s%s taken back from every pod; back on %s", c, why, orNone(r.Good))
		}
		if r.First == pod {
			return fmt.Sprintf("rejected here: config %s failed%s; back on %s", c, why, orNone(r.Good))
		}
		return fmt.Sprintf("rejected: config %s failed on pod %s%s; keeps %s", c, first, why, orNone(r.Good))
	}
	return oneLine(string(r.State)) + ": config " + c
}

// oneLine keeps a field anyone who may write the Lease wrote on one line of the tree: every
// control character becomes "?", so that it cannot draw lines of its own.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			return '?'
		}
		return r
	}, s)
}

func short(id string) string { return oneLine(id[:min(len(id), 8)]) }

func orNone(id string) string {
	if id == "" {
		return "the config it started with"
	}
	return "config " + short(id)
}
