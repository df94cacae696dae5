// Package podevents posts Events about the reloader's own pod, so that `kubectl describe pod`
// shows reloads and rejected config beside the app's own events.
//
// It does what the parts of client-go's tools/record that a sidecar needs do, without the
// broadcaster and the clientset's scheme: an Event that repeats (same type, reason and
// message) raises the count of the one already posted instead of adding another, each pod
// gets at most 25 Events in a burst and then one every 5 minutes (record's spam filter), and
// posting never blocks the reload loop: Events wait in a short queue and are dropped, with a
// log line, when it is full.
package podevents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/reloader/coreclient"
)

// Component is the source the Events name.
const Component = "configwave-reloader"

const (
	queueLen = 32
	// spamBurst and spamEvery are tools/record's defaults for one object and source.
	spamBurst = 25
	spamEvery = 5 * time.Minute
	// maxMessage is the limit of an events.k8s.io note, which kubectl and dashboards assume.
	maxMessage = 1024
	tries      = 3
)

// Pod names the pod the Events are about, or another object of the pod's namespace (Kind; ""
// for a Pod): --rollout=one-first tells of a rejected config on the ConfigMap or Secret too.
type Pod struct {
	Kind            string
	Namespace, Name string
	UID             types.UID
}

// Recorder posts Events about one pod. Event may be called from any goroutine; nothing is
// posted until Run.
type Recorder struct {
	client rest.Interface
	pod    Pod
	queue  chan event
	spam   *rate.Limiter
	now    func() time.Time
	posted map[key]posted // Events already in the API, by what they say; only Run's goroutine uses it
}

// key is what makes two Events the same one: the object (its UID) and what they say.
type key struct {
	uid                        types.UID
	eventtype, reason, message string
}

type event struct {
	key
	at time.Time
}

type posted struct {
	name  string
	count int32
}

// New returns a Recorder for pod that posts through client, a core/v1 REST client.
func New(client rest.Interface, pod Pod) *Recorder {
	return &Recorder{
		client: client,
		pod:    pod,
		queue:  make(chan event, queueLen),
		spam:   rate.NewLimiter(rate.Every(spamEvery), spamBurst),
		now:    time.Now,
		posted: map[key]posted{},
	}
}

// Event queues an Event. It never blocks: past the spam limit, or with the queue full, the
// Event is dropped and the drop logged (the log line of the reloader that caused the Event
// says the same thing at a default verbosity).
func (r *Recorder) Event(eventtype, reason, message string) {
	r.EventAbout(r.pod.UID, eventtype, reason, message)
}

// EventAbout is Event about the object as it is now, by its UID: `kubectl describe` shows only
// the Events that carry its UID, and a ConfigMap deleted and made again has another.
func (r *Recorder) EventAbout(uid types.UID, eventtype, reason, message string) {
	if len(message) > maxMessage {
		message = truncate(message, maxMessage)
	}
	e := event{key: key{uid, eventtype, reason, message}, at: r.now()}
	if !r.spam.AllowN(e.at, 1) {
		klog.V(2).InfoS("event dropped: more than the pod's Event budget", "pod", r.pod.Namespace+"/"+r.pod.Name, "reason", reason)
		return
	}
	select {
	case r.queue <- e:
	default:
		klog.V(2).InfoS("event dropped: the API server is not taking Events fast enough", "pod", r.pod.Namespace+"/"+r.pod.Name, "reason", reason)
	}
}

// Run posts queued Events until ctx ends.
func (r *Recorder) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-r.queue:
			r.post(ctx, e)
		}
	}
}

// post creates the Event, or raises the count of the same Event posted before. A failed try
// is retried twice, a second apart, unless the API server refused the Event for good.
func (r *Recorder) post(ctx context.Context, e event) {
	var err error
	for try := 1; try <= tries; try++ {
		if err = r.postOnce(ctx, e); err == nil || permanent(err) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(try) * time.Second):
		}
	}
	if err != nil && ctx.Err() == nil {
		klog.ErrorS(err, "could not post an Event about this pod; check that the reloader may create and patch events in its namespace",
			"pod", r.pod.Namespace+"/"+r.pod.Name, "reason", e.reason)
	}
}

func (r *Recorder) postOnce(ctx context.Context, e event) error {
	prev, seen := r.posted[e.key]
	at := metav1.NewTime(e.at)
	if seen {
		count := prev.count + 1
		patch := fmt.Sprintf(`{"count":%d,"lastTimestamp":%q}`, count, at.UTC().Format(time.RFC3339))
		err := r.client.Patch(types.MergePatchType).Namespace(r.pod.Namespace).Resource("events").Name(prev.name).
			Body([]byte(patch)).Do(ctx).Error()
		if err == nil {
			r.remember(e.key, posted{name: prev.name, count: count})
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("raise the count of event %s/%s: %w", r.pod.Namespace, prev.name, err)
		}
		// The Event expired (the API server keeps them for an hour): post it anew.
	}
	ev := &coreclient.Event{
		ObjectMeta: metav1.ObjectMeta{
			// tools/record's naming: the object's name and the time in hexadecimal nanoseconds.
			Name:      fmt.Sprintf("%s.%x", r.pod.Name, e.at.UnixNano()),
			Namespace: r.pod.Namespace,
		},
		InvolvedObject: coreclient.ObjectReference{Kind: cmp.Or(r.pod.Kind, "Pod"), APIVersion: "v1", Namespace: r.pod.Namespace, Name: r.pod.Name, UID: cmp.Or(e.uid, r.pod.UID)},
		Type:           e.eventtype,
		Reason:         e.reason,
		Message:        e.message,
		Source:         coreclient.EventSource{Component: Component},
		FirstTimestamp: at,
		LastTimestamp:  at,
		Count:          1,
	}
	if err := r.client.Post().Namespace(r.pod.Namespace).Resource("events").Body(ev).Do(ctx).Error(); err != nil {
		return fmt.Errorf("create event %s/%s: %w", r.pod.Namespace, ev.Name, err)
	}
	r.remember(e.key, posted{name: ev.Name, count: 1})
	return nil
}

func (r *Recorder) remember(k key, p posted) {
	if len(r.posted) >= 4096 { // a long-lived pod with ever-new messages must not grow without bound
		clear(r.posted)
	}
	r.posted[k] = p
}

// permanent says whether the API server refused the request for good: retrying cannot help.
func permanent(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false // a connection error
	}
	return !apierrors.IsServerTimeout(err) && !apierrors.IsTimeout(err) && !apierrors.IsTooManyRequests(err) &&
		!apierrors.IsInternalError(err) && !apierrors.IsServiceUnavailable(err)
}

// truncate cuts s to at most n bytes on a rune boundary and marks the cut.
func truncate(s string, n int) string {
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
