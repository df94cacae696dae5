package apisource

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/configwave/configwave/internal/reloader/coreclient"
)

// A watch that keeps bringing events or bookmarks stays open; one that goes silent for the
// bound ends, once, so that the reflector opens a new one.
func TestIdleWatchEndsASilentWatch(t *testing.T) {
	fake := watch.NewFakeWithChanSize(10, false)
	var idle atomic.Int32
	w := newIdleWatch(fake, 150*time.Millisecond, func() { idle.Add(1) })
	for range 4 { // 400 ms of bookmarks, each within the bound
		fake.Action(watch.Bookmark, &coreclient.ConfigMap{})
		ev := <-w.ResultChan()
		assert.Equal(t, watch.Bookmark, ev.Type, "events are passed on as they come")
		time.Sleep(100 * time.Millisecond)
	}
	assert.Zero(t, idle.Load(), "a watch with bookmarks is not silent")
	select {
	case _, open := <-w.ResultChan():
		require.False(t, open, "no event after the silence")
	case <-time.After(2 * time.Second):
		t.Fatal("a silent watch was not ended")
	}
	assert.EqualValues(t, 1, idle.Load())
	assert.True(t, fake.IsStopped(), "the silent watch itself is stopped")
}

func TestIdleWatchStop(t *testing.T) {
	fake := watch.NewFake()
	w := newIdleWatch(fake, time.Hour, func() { t.Error("not idle") })
	w.Stop()
	w.Stop() // twice is fine, as for any watch.Interface
	_, open := <-w.ResultChan()
	assert.False(t, open)
	require.Eventually(t, fake.IsStopped, time.Second, 5*time.Millisecond)
}
