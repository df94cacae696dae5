package main

import (
	"bytes"
	"fmt"
	"os/exec"
)

// micro runs the Go micro-benchmarks of the hash, the digests and the unpack, five times each
// (benchstat-compatible output).
func micro(e *env, r *report, root string) error {
	count := e.reps(3, 5)
	cmd := exec.CommandContext(e.ctx, "go", "test", "-run", "^$", "-bench", ".", "-benchmem", fmt.Sprintf("-count=%d", count),
		"./internal/wave/confighash", "./internal/reloader/unpack")
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: %s", err, out.String())
	}
	r.Micro = out.String()
	return nil
}
