package reload

// The loop's state machine: what each pass's outcome makes of the state (state.next, a pure
// function: transitions_test.go), and how each move is told to people: Events, metrics and
// /status.

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/kube/configref"
)

// state is everything the loop remembers between passes.
type state struct {
	unpacked    bool      // the first complete set is in place
	liveHash    string    // hash of the set under the root
	liveSum     []byte    // its ToldRecord sum, when there is a record
	notifyDue   bool      // a set went live and the app has not been told yet
	rejected    string    // last set the check rejected; not checked again until it changes
	waitingFor  string    // missing sources last reported
	unusedItems string    // --items keys no source has, last reported
	leftOut     []LeftOut // objects left out of the set last laid out (Layout.Isolate)
	result      string    // last result, ResultX; "" before the first
	lastError   string
	since       time.Time // when result last changed
	// failingSince is when the app first failed to take a set it is due; zero when it is not
	// failing. notifyError is the last such failure.
	failingSince time.Time
	notifyError  string
}

// outcome is what one pass found and did.
type outcome struct {
	missing     string // sources that do not exist
	sources     string // the sources, for the log and Events
	unusedItems string
	leftOut     []LeftOut // objects the layout left out of the wanted set
	hash        string    // hash of the wanted set; "" when it could not be laid out
	sum         []byte    // its ToldRecord sum, when there is a record
	swapped     bool      // the wanted set went live in this pass
	tellOnStart bool      // first pass over a set a previous reloader left: the app runs that one
	untold      bool      // first pass, and the record says the app never took the set on disk
	first       bool      // this pass made the first unpack
	// liveKept: a restarted reloader's first set was rejected, and the set its predecessor
	// made live stays: that one is in place, so the reloader is ready.
	liveKept  bool
	result    string // what became of the wanted set: a failing ResultX, or ""
	err       error  // with a failing result
	reason    string // the Event's reason for err
	notified  bool   // the app was told in this pass
	early     bool   // the set read is the one a request sent on its swap told the app of, or tried to
	notifyErr error  // the app was due and could not be told
	nobody    bool   // no app to tell (no --reload-http, no app): a swap is the whole change
	retry     bool   // run again after RetryInterval even without a change
}

// Status is the loop's state as /status serves it. It never holds a value from a source.
type Status struct {
	Ready        bool       `json:"ready"`
	LiveHash     string     `json:"liveHash,omitempty"`
	NotifyDue    bool       `json:"notifyPending"`
	LastResult   string     `json:"lastResult,omitempty"`
	LastError    string     `json:"lastError,omitempty"`
	Since        time.Time  `json:"since,omitzero"`
	FailingSince *time.Time `json:"appFailingToReloadSince,omitempty"`
	NotifyError  string     `json:"lastReloadError,omitempty"`
	Waiting      string     `json:"waitingFor,omitempty"`
	// LeftOut: objects left out of the config, each "configmap ns/name: why"; the others
	// keep updating.
	LeftOut []string `json:"leftOut,omitempty"`
}

// next is the loop's state after a pass with outcome o, at time now.
func (s state) next(o outcome, now time.Time) state {
	n := s
	n.waitingFor = o.missing
	if o.missing == "" {
		n.unusedItems = o.unusedItems
	}
	if o.hash != "" { // laid out: what it left out is current
		n.leftOut = o.leftOut
	}
	if o.first || o.liveKept {
		n.unpacked = true
	}
	if o.swapped || o.first {
		n.liveHash, n.liveSum = o.hash, o.sum
	}
	switch {
	case o.notified, o.nobody:
		n.notifyDue = false
	case o.tellOnStart, o.swapped && s.unpacked:
		n.notifyDue = true
	}
	switch o.result {
	case ResultValidationFailed:
		n.rejected = o.hash
	case "":
		if o.swapped || o.hash == s.liveHash {
			n.rejected = ""
		}
	}
	if o.notifyErr != nil {
		if n.failingSince.IsZero() {
			n.failingSince = now
		}
		n.notifyError = o.notifyErr.Error()
	} else if !n.notifyDue {
		n.failingSince, n.notifyError = time.Time{}, ""
	}
	result, err := o.result, o.err
	switch {
	case result != "":
	case o.notifyErr != nil:
		result, err = ResultNotifyFailed, o.notifyErr
	case o.notified && (o.hash == "" || o.hash != n.rejected):
		result = ResultSuccess // unless the newest set is still the rejected one
	case o.nobody && o.swapped && s.unpacked:
		result = ResultSuccess // live, and nobody to tell
	}
	if result != "" {
		if result != s.result {
			n.since = now
		}
		n.result = result
		n.lastError = ""
		if err != nil {
			n.lastError = err.Error()
		}
	} else if o.hash != "" && o.hash == s.liveHash && s.result != ResultSuccess && s.result != "" && !n.notifyDue {
		// The sources went back to the live set (a rejected change was reverted): all is well.
		n.result, n.lastError, n.since = ResultSuccess, "", now
	}
	return n
}

// report tells people what the pass changed: logs, Events and metrics.
func (r *Reloader) report(prev state, o outcome) {
	now := r.st
	if o.missing != "" && o.missing != prev.waitingFor {
		if !prev.unpacked {
			klog.InfoS("waiting for sources to exist before the first unpack", "missing", o.missing)
		} else {
			klog.InfoS("source deleted; keeping the last files until it is back", "missing", o.missing)
			r.event("Warning", "ConfigSourceMissing", fmt.Sprintf("%s not found; keeping the last config", o.missing))
		}
	}
	if o.unusedItems != "" && o.unusedItems != prev.unusedItems {
		klog.InfoS("warning: --items names keys that no source has; check their spelling", "keys", o.unusedItems)
	}
	r.reportLeftOut(prev.leftOut, now.leftOut)
	if o.swapped && r.Metrics != nil && now.liveHash != prev.liveHash {
		r.Metrics.ConfigInfo.Reset()
		r.Metrics.ConfigInfo.WithLabelValues(now.liveHash).Set(1)
	}
	if o.first {
		klog.InfoS("config unpacked", "hash", now.liveHash, "appTold", o.tellOnStart)
		r.setReadyMetric(true)
	}
	if o.err != nil {
		r.count(o.result)
		klog.ErrorS(o.err, "config not applied", "result", o.result)
		r.event("Warning", o.reason, o.err.Error())
	}
	if o.notifyErr != nil {
		r.count(ResultNotifyFailed)
		klog.ErrorS(o.notifyErr, "app not told", "result", ResultNotifyFailed, "failingSince", now.failingSince)
		r.event("Warning", "ReloadFailed", o.notifyErr.Error())
	}
	if o.notified {
		r.count(ResultSuccess)
		if r.Metrics != nil {
			r.Metrics.LastSuccess.SetToCurrentTime()
		}
		why := fmt.Sprintf("config from %s changed", o.sources)
		if o.untold {
			why = fmt.Sprintf("the reloader restarted, and the app had not taken the config of %s on disk", o.sources)
		} else if o.tellOnStart && r.TellOnStart {
			why = fmt.Sprintf("the reloader started with config from %s", o.sources)
		} else if o.tellOnStart {
			why = fmt.Sprintf("the reloader restarted and found an older config of %s on disk", o.sources)
		}
		klog.InfoS("app reloaded", "why", why, "hash", now.liveHash)
		r.event("Normal", "ConfigReloaded", fmt.Sprintf("%s (hash %s); app reloaded", why, shortHash(now.liveHash)))
	}
	upToDate := now.result == ResultSuccess || now.result == ""
	if r.Metrics != nil {
		r.Metrics.LastReloadSuccessful.Set(boolGauge(upToDate))
	}
	if r.Observer != nil {
		r.Observer.Pass(PassReport{Applied: o.missing == "", ApplyErr: o.err, Told: o.notified, TellErr: o.notifyErr, UpToDate: upToDate})
	}
}

// maxLeftOutEvents bounds the Events of one pass: a label put on many bad objects at once
// must not flood the namespace's Events.
const maxLeftOutEvents = 10

// reportLeftOut says which objects the layout newly left out, and which came back.
func (r *Reloader) reportLeftOut(prev, now []LeftOut) {
	if slices.Equal(prev, now) {
		return
	}
	before := map[configref.Ref]string{}
	for _, l := range prev {
		before[l.Ref] = l.Why
	}
	events := 0
	for _, l := range now {
		if why, was := before[l.Ref]; was && why == l.Why {
			delete(before, l.Ref)
			continue
		}
		delete(before, l.Ref)
		klog.InfoS("warning: object left out of the config; the others keep updating", "object", l.Ref.String(), "why", l.Why)
		if events++; events <= maxLeftOutEvents {
			r.event("Warning", "ConfigLeftOut", fmt.Sprintf("%s left out of the config, the other objects keep updating: %s", l.Ref, l.Why))
		}
	}
	if events > maxLeftOutEvents {
		r.event("Warning", "ConfigLeftOut", fmt.Sprintf("%d more objects left out of the config: see the reloader's log or /status", events-maxLeftOutEvents))
	}
	for ref := range before {
		klog.InfoS("object back in the config", "object", ref.String())
	}
	if r.Metrics != nil {
		r.Metrics.LeftOut.Set(float64(len(now)))
	}
}

// publish makes the state visible to the HTTP handlers.
func (r *Reloader) publish() {
	s := r.st
	st := &Status{
		Ready: s.unpacked, LiveHash: s.liveHash, NotifyDue: s.notifyDue,
		LastResult: s.result, LastError: s.lastError, Since: s.since, Waiting: s.waitingFor,
		NotifyError: s.notifyError,
	}
	for _, l := range s.leftOut {
		st.LeftOut = append(st.LeftOut, l.Ref.String()+": "+l.Why)
	}
	if !s.failingSince.IsZero() {
		t := s.failingSince
		st.FailingSince = &t
	}
	r.status.Store(st)
}

func (r *Reloader) setReadyMetric(v bool) {
	if r.Metrics != nil {
		r.Metrics.Ready.Set(boolGauge(v))
	}
}

func boolGauge(v bool) float64 {
	if v {
		return 1
	}
	return 0
}
