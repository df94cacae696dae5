package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The demo is what a newcomer runs first: it must tell the whole story, in order of cause.
func TestDemoTellsTheWholeStory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out, false), out.String())
	t.Log("\n" + out.String())
	for _, want := range []string{
		"control plane up",
		"reloader: unpacked app.yaml = \"greeting: hello\"",
		"1 ReplicaSet",
		"wave recorded its config inputs and rolled nothing",
		"reloader: new app.yaml on disk",
		"app: reload request POST /-/reload, reads app.yaml = \"greeting: hello, world\"",
		"wave: Deployment app template annotation wave.pusher.com/config-hash",
		"new ReplicaSet",
		"rollout complete",
		"ConfigChanged: configmap/app-config changed",
		"nothing left running",
	} {
		assert.True(t, strings.Contains(out.String(), want), "demo output lacks %q", want)
	}
}
