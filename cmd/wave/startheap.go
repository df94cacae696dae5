package main

import (
	"context"
	"runtime/debug"
	"time"

	"k8s.io/client-go/tools/cache"
)

// returnStartHeap hands the heap of wave's start back to the OS, twice. Decoding every
// ConfigMap, Secret and workload once leaves a heap far larger than the digests and slim
// workloads kept; the first pass over every workload then adds its own garbage, and Go's
// scavenger keeps up to twice the live heap mapped. Without this, the RSS of a wave that
// started among 100,000 objects stays at its start-up peak. compact, called once the caches
// synced, moves what they keep away from the heap the initial lists left, so that the first
// collection can free it. Only once per process: after that, garbage comes a little at a time
// and the scavenger keeps up.
func returnStartHeap(ctx context.Context, synced []cache.InformerSynced, compact func(), queued func() float64) {
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	compact()
	debug.FreeOSMemory()
	// The first pass is over when the queue stayed empty for two looks in a row (the
	// informers may still be handing over their initial lists at the first). A replica that
	// is not the leader does not work its queue: it gives up after a minute.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	empty := 0
	for range 240 {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if queued() > 0 {
			empty = 0
			continue
		}
		if empty++; empty == 2 {
			debug.FreeOSMemory()
			return
		}
	}
}
