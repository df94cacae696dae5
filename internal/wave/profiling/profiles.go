// Package profiling serves Go's runtime profiles (/debug/pprof/...) on an address of their
// own, for Stakater Reloader's --enable-pprof and --pprof-addr. It is a package apart from
// serve because importing net/http/pprof links it into every binary that imports the package,
// and the reloader sidecar has no use for it.
package profiling

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/configwave/configwave/internal/process/serve"
)

// Listen binds addr. The command line (/debug/pprof/cmdline) is left out: it may hold a
// webhook URL with its token.
func Listen(addr string) (*serve.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on --pprof-addr=%s: %w (pick a free port)", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/debug/pprof/cmdline" {
			http.NotFound(w, r)
			return
		}
		pprof.Index(w, r)
	})
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return serve.New(ln, mux), nil
}
