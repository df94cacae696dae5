//go:build !configwave_fileonly

package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkedConfig is the config of a reloader command line, as run1 gets it.
func checkedConfig(t *testing.T, args []string) (*config, error) {
	t.Helper()
	cl := newCommandLine()
	cl.fs.SetOutput(io.Discard)
	require.NoError(t, cl.fs.Parse(cl.args(args)))
	app, err := cl.appArgs()
	require.NoError(t, err)
	o, err := cl.translate("reloader", app)
	require.NoError(t, err)
	return o.check(app)
}

func TestRolloutFlags(t *testing.T) {
	root := t.TempDir()
	c, err := checkedConfig(t, []string{"--configroot=" + root, "--configmap=a", "--reload-http=http://127.0.0.1:8080/-/reload", "--rollout=one-first",
		"--rollout-soak=10s", "--rollout-max-unavailable=25%", "--health-url=http://127.0.0.1:8080/healthz"})
	require.NoError(t, err)
	assert.Equal(t, rolloutConfig{oneFirst: true, soak: 10 * time.Second, maxBusy: "25%", healthURL: "http://127.0.0.1:8080/healthz", healthTimeout: time.Second, healthFailures: 1}, c.rollout)
	assert.Equal(t, rolloutOneFirst, c.rollout.name())

	c, err = checkedConfig(t, []string{"--configroot=" + root, "--configmap=a", "--reload-http=http://127.0.0.1:8080/-/reload"})
	require.NoError(t, err)
	assert.Equal(t, rolloutConfig{}, c.rollout, "all at once by default")
	assert.Equal(t, rolloutAllAtOnce, c.rollout.name())
}
