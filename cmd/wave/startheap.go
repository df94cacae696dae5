package main

import (
	"context"
	"os"
	"runtime/debug"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/wave/rollout"
)

// startGCPercent is Go's GC target while the informers list and the first pass runs. Their
// heap is mostly decoded objects about to be reduced to digests; Go's default (100) lets it
// grow to twice what survives, and the start-up peak is the most wave ever holds: with
// 100,000 objects and 10,000 workloads, 227-254 MiB at 100 against 153-155 at 25, near and
// well under the chart's 256 MiB limit. 25 costs CPU while it lasts (/readyz 3.4-4.3 s ->
// 5.7-5.9 s there). A GOGC set by the user is left as it is.
const startGCPercent = 25

// startInformers starts the informers and then looks after the memory of wave's start:
// decoding every ConfigMap, Secret and workload once leaves a heap far larger than the
// digests and slim workloads kept, and the first pass over every workload adds its own
// garbage. Once the caches synced, the data kept whole is packed away from that heap
// (Informers.Compact) and the heap is handed back to the OS; again after the first pass, once
// firstPassDone gathered what the pass keeps (Controller.Compact). Only
// once per process: after that, garbage comes a little at a time and the scavenger keeps up.
func startInformers(ctx context.Context, inf *rollout.Informers, queued func() float64, firstPassDone func()) {
	if _, set := os.LookupEnv("GOGC"); !set {
		defer debug.SetGCPercent(debug.SetGCPercent(startGCPercent))
	}
	inf.Start(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.Synced()...) {
		return
	}
	inf.Compact()
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
			firstPassDone()
			debug.FreeOSMemory()
			klog.V(2).InfoS("start-up heap handed back to the OS")
			return
		}
	}
}
