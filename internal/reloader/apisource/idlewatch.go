package apisource

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// idleWatch ends a watch from which nothing came for idle: no event, and no bookmark, which
// the API server sends about once a minute on a healthy watch. A watch can go silent while its
// connection stays up (k8s-sidecar's users met it: kiwigrid/k8s-sidecar #85, #338, #621);
// ending it makes client-go's reflector open a new one, which the source counts. A connection
// that died without a FIN is found by client-go's HTTP/2 health check
// (HTTP2_READ_IDLE_TIMEOUT_SECONDS, 30 s, plus HTTP2_PING_TIMEOUT_SECONDS, 15 s).
type idleWatch struct {
	inner  watch.Interface
	out    chan watch.Event
	stop   chan struct{}
	once   sync.Once
	onIdle func()
}

// The clock is a parameter so that a test can step time instead of sleeping through it: a
// test that slept could not tell a slow machine from a silent watch.
func newIdleWatch(inner watch.Interface, clk clock.Clock, idle time.Duration, onIdle func()) *idleWatch {
	w := &idleWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{}), onIdle: onIdle}
	timer := clk.NewTimer(idle) // made here, so that time a test steps after this call counts
	go w.run(timer, idle)
	return w
}

func (w *idleWatch) run(timer clock.Timer, idle time.Duration) {
	defer close(w.out)
	defer w.inner.Stop()
	defer timer.Stop()
	in := w.inner.ResultChan()
	for {
		select {
		case ev, ok := <-in:
			if !ok {
				return
			}
			timer.Reset(idle)
			select {
			case w.out <- ev:
			case <-w.stop:
				return
			}
		case <-timer.C():
			w.onIdle()
			return
		case <-w.stop:
			return
		}
	}
}

func (w *idleWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *idleWatch) Stop() { w.once.Do(func() { close(w.stop) }) }
