package startup

// Go's soft memory limit from the container's, so that a sidecar under a tight limit (the
// Prometheus Operator gives its reloader 50Mi) collects garbage before the kernel kills it,
// rather than after.

import (
	"io/fs"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultMemoryLimitRatio is the share of the container's limit Go aims at when nothing else is said: room
// for what Go does not count (the binary's pages, the stacks of other threads).
const DefaultMemoryLimitRatio = 0.9

// MemoryLimitFromCgroup reads the container's memory limit: cgroup v2's memory.max, else cgroup v1's
// memory/memory.limit_in_bytes; false when there is none (max, or v1's "no limit" value).
func MemoryLimitFromCgroup(cgroup fs.FS) (int64, bool) {
	for _, f := range []string{"memory.max", "memory/memory.limit_in_bytes"} {
		b, err := fs.ReadFile(cgroup, f)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		// v1 says "no limit" with a number near the largest int64, rounded to pages.
		if err != nil || n <= 0 || n >= math.MaxInt64/2 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// ApplyMemoryLimit sets Go's memory limit to ratio of the container's, unless GOMEMLIMIT is set (Go reads
// it itself) or there is no container limit; it returns the limit set, 0 for none.
func ApplyMemoryLimit(ratio float64, lookupEnv func(string) (string, bool), cgroup fs.FS) int64 {
	if _, set := lookupEnv("GOMEMLIMIT"); set || ratio <= 0 || ratio > 1 {
		return 0
	}
	limit, ok := MemoryLimitFromCgroup(cgroup)
	if !ok {
		return 0
	}
	soft := int64(ratio * float64(limit))
	debug.SetMemoryLimit(soft)
	return soft
}
