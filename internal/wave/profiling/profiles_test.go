package profiling

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServesProfilesButNotTheCommandLine(t *testing.T) {
	s, err := Listen("127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Run() }()
	defer func() { s.Stop(nil); require.NoError(t, <-done) }()

	for path, want := range map[string]int{
		"/debug/pprof/":          http.StatusOK,
		"/debug/pprof/heap":      http.StatusOK,
		"/debug/pprof/goroutine": http.StatusOK,
		"/debug/pprof/cmdline":   http.StatusNotFound,
		"/metrics":               http.StatusNotFound,
	} {
		resp, err := http.Get("http://" + s.Addr() + path)
		require.NoError(t, err, path)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, path)
	}
}
