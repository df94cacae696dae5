package main

import (
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// eventGrace is how long a stop waits for the Events still queued to be written.
const eventGrace = 5 * time.Second

// eventTally counts the Events wave emits and the writes its sink made, so that a stop waits
// for those still queued: client-go's broadcaster drops them when it is shut down.
type eventTally struct{ emitted, written atomic.Int64 }

// wait returns once every Event emitted was written, or grace has passed; it returns how
// many were not written (queued still, dropped by the broadcaster, or filtered as spam).
func (t *eventTally) wait(grace time.Duration) int64 {
	deadline := time.Now().Add(grace)
	for {
		left := t.emitted.Load() - t.written.Load()
		if left <= 0 || !time.Now().Before(deadline) {
			return max(left, 0)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type talliedSink struct {
	record.EventSink
	t *eventTally
}

func (s talliedSink) Create(e *corev1.Event) (*corev1.Event, error) {
	defer s.t.written.Add(1)
	return s.EventSink.Create(e)
}

func (s talliedSink) Update(e *corev1.Event) (*corev1.Event, error) {
	defer s.t.written.Add(1)
	return s.EventSink.Update(e)
}

func (s talliedSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	defer s.t.written.Add(1)
	return s.EventSink.Patch(e, data)
}

type talliedRecorder struct {
	record.EventRecorder
	t *eventTally
}

func (r talliedRecorder) Event(o runtime.Object, eventtype, reason, message string) {
	r.t.emitted.Add(1)
	r.EventRecorder.Event(o, eventtype, reason, message)
}

func (r talliedRecorder) Eventf(o runtime.Object, eventtype, reason, format string, args ...any) {
	r.t.emitted.Add(1)
	r.EventRecorder.Eventf(o, eventtype, reason, format, args...)
}

func (r talliedRecorder) AnnotatedEventf(o runtime.Object, annotations map[string]string, eventtype, reason, format string, args ...any) {
	r.t.emitted.Add(1)
	r.EventRecorder.AnnotatedEventf(o, annotations, eventtype, reason, format, args...)
}
