package apisource

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/configwave/configwave/internal/reloader/coreclient"
)

// A watch that keeps bringing events or bookmarks stays open; one that goes silent for the
// bound ends, once, so that the reflector opens a new one. Time is stepped, never slept, so
// that a slow machine cannot stretch a gap past the bound.
func TestIdleWatchEndsASilentWatch(t *testing.T) {
	fake := watch.NewFakeWithChanSize(10, false)
	clk := testingclock.NewFakeClock(time.Now())
	var idle atomic.Int32
	w := newIdleWatch(fake, clk, 150*time.Millisecond, func() { idle.Add(1) })
	for range 4 { // 400 ms of bookmarks, each within the bound
		fake.Action(watch.Bookmark, &coreclient.ConfigMap{})
		ev := <-w.ResultChan() // the timer was reset before the event was passed on
		assert.Equal(t, watch.Bookmark, ev.Type, "events are passed on as they come")
		clk.Step(100 * time.Millisecond)
	}
	assert.Zero(t, idle.Load(), "a watch with bookmarks is not silent")
	assert.False(t, fake.IsStopped(), "a watch with bookmarks is not stopped")
	clk.Step(50 * time.Millisecond)
	select {
	case _, open := <-w.ResultChan():
		require.False(t, open, "no event after the silence")
	case <-time.After(time.Minute):
		t.Fatal("a silent watch was not ended")
	}
	assert.EqualValues(t, 1, idle.Load())
	assert.True(t, fake.IsStopped(), "the silent watch itself is stopped")
}

func TestIdleWatchStop(t *testing.T) {
	fake := watch.NewFake()
	w := newIdleWatch(fake, clock.RealClock{}, time.Hour, func() { t.Error("not idle") })
	w.Stop()
	w.Stop() // twice is fine, as for any watch.Interface
	_, open := <-w.ResultChan()
	assert.False(t, open)
	require.Eventually(t, fake.IsStopped, time.Second, 5*time.Millisecond)
}
