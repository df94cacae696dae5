package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/testenv/testcluster"
)

// The demo is what a newcomer runs first: it must tell the whole story, in order of cause.
// Where a real node can run, its pods really run (and under CI=true one must); kwok's story
// is the fallback everywhere else, so it is told here too.
func TestDemoTellsTheWholeStory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	rollout := []string{
		"control plane up",
		"1 ReplicaSet",
		"wave recorded its config inputs and rolled nothing",
		"wave: Deployment app template annotation wave.pusher.com/config-hash",
		"new ReplicaSet",
		"rollout complete",
		"ConfigChanged: configmap/app-config changed",
		"--- kubectl configwave history deploy/app",
		"REVISION",
		"nothing left running",
	}
	t.Run("real node", func(t *testing.T) {
		if err := testcluster.CanRunNode(); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal(err)
			}
			t.Skip(err)
		}
		out := tell(t, options{})
		for _, want := range append(rollout,
			"real node",
			`web: pod web-`,
			`nginx answers "hello" at`,
			"kubelet: nginx.conf in pod web-",
			`reloader: `,
			`"app reloaded"`,
			`web: nginx answers "hello, world", from the same pod web-`,
			"(restarts: 0): reloaded in place",
		) {
			assert.Contains(t, out, want)
		}
		assert.NotContains(t, out, "error:")
	})
	t.Run("kwok", func(t *testing.T) {
		out := tell(t, options{kwok: true})
		for _, want := range append(rollout,
			"reloader: unpacked app.yaml = \"greeting: hello\"",
			"reloader: new app.yaml on disk",
			"app: reload request POST /-/reload, reads app.yaml = \"greeting: hello, world\"",
		) {
			assert.Contains(t, out, want)
		}
		assert.NotContains(t, out, "error:")
	})
}

func tell(t *testing.T, o options) string {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out, o), out.String())
	t.Log("\n" + out.String())
	return out.String()
}
