package main

import (
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// eventGrace is how long a stop waits for the Events still queued to be written.
const eventGrace = 5 * time.Second

// eventQuiet is how long the sink must have been idle before a stop takes the queue for empty:
// the broadcaster hands an emitted Event to the sink within milliseconds.
const eventQuiet = 300 * time.Millisecond

// sinkActivity is what the Event sink is doing, counted at the sink itself: client-go's
// broadcaster drops what it still queues when it is shut down, and an Event its correlator
// filters (spam, or aggregated) never reaches the sink, while a failed write is tried again,
// so counting at the recorder tells nothing of what is left to write.
type sinkActivity struct {
	inflight atomic.Int64
	last     atomic.Int64 // when a write last began or ended, Unix nanoseconds
}

func (a *sinkActivity) begin() { a.inflight.Add(1); a.last.Store(time.Now().UnixNano()) }
func (a *sinkActivity) end()   { a.inflight.Add(-1); a.last.Store(time.Now().UnixNano()) }

// wait returns once the sink has written nothing for quiet (counted from the wait's start at
// the earliest: what was emitted just before still has to reach it) and holds no write, or
// grace has passed; it returns how many writes were still under way then.
func (a *sinkActivity) wait(grace, quiet time.Duration) int64 {
	start := time.Now()
	deadline := start.Add(grace)
	for {
		n := a.inflight.Load()
		idle := time.Since(time.Unix(0, max(a.last.Load(), start.UnixNano())))
		if n == 0 && idle >= quiet || !time.Now().Before(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// countedSink counts the writes of an Event sink.
type countedSink struct {
	record.EventSink
	a *sinkActivity
}

func (s countedSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.a.begin()
	defer s.a.end()
	return s.EventSink.Create(e)
}

func (s countedSink) Update(e *corev1.Event) (*corev1.Event, error) {
	s.a.begin()
	defer s.a.end()
	return s.EventSink.Update(e)
}

func (s countedSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	s.a.begin()
	defer s.a.end()
	return s.EventSink.Patch(e, data)
}
