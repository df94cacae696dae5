package main

import (
	"fmt"
	"strings"

	flag "github.com/spf13/pflag"
)

// configmap-reload's flags (jimmidyson/configmap-reload, as its main parses them with Go's flag
// package), so that a sidecar of it keeps its arguments and changes only its image. They land
// here, apart from the reloader's own options; translate alone turns them into options. The
// migration table in docs/migrating.md says where we differ.
type configmapReloadFlags struct {
	webhookURLs []string
	method      string
	statusCode  int
	retries     int
	listen      string
	metricsPath string
}

// configmapReloadOnly are the flags only configmap-reload has: one of them given makes the
// command line configmap-reload's. --volume-dir is configmap-reload's and ours alike.
var configmapReloadOnly = []string{"webhook-url", "webhook-method", "webhook-status-code", "webhook-retries", "web.listen-address", "web.telemetry-path"}

func (p *configmapReloadFlags) add(fs *flag.FlagSet) {
	fs.StringArrayVar(&p.webhookURLs, "webhook-url", nil, "configmap-reload's name for --reload-http; repeatable.")
	fs.StringVar(&p.method, "webhook-method", "POST", "configmap-reload's name for --reload-http-method.")
	fs.IntVar(&p.statusCode, "webhook-status-code", 0, "configmap-reload's: the one status code that means the app reloaded (default: --reload-http-success-codes, 200-299).")
	fs.IntVar(&p.retries, "webhook-retries", 0, "configmap-reload's: tries of one reload request (default: --reload-http-tries).")
	fs.StringVar(&p.listen, "web.listen-address", ":9533", "configmap-reload's name for --listen-address.")
	fs.StringVar(&p.metricsPath, "web.telemetry-path", "/metrics", "configmap-reload's name for --metrics-path.")
}

// translate turns a configmap-reload command line into the reloader's options: each of its
// flags sets the one of ours it names, and giving both names of one setting is an error. It
// returns a new options; own is not changed.
func (p configmapReloadFlags) translate(own options) (options, error) {
	o := own
	o.peer.name = peerConfigmapReload
	o.peer.foldersMustExist = true // a mounted volume exists when the container starts: a missing one is a typo
	o.reloadHTTP = append(append([]string(nil), own.reloadHTTP...), p.webhookURLs...)
	for _, s := range []struct {
		theirs, ours string
		set          func()
	}{
		{"webhook-method", "reload-http-method", func() { o.reloadMethod = p.method }},
		{"webhook-status-code", "reload-http-success-codes", func() { o.reloadSuccess = fmt.Sprint(p.statusCode) }},
		{"webhook-retries", "reload-http-tries", func() { o.reloadTries = p.retries }},
		{"web.listen-address", "listen-address", func() { o.listenAddress = p.listen }},
		{"web.telemetry-path", "metrics-path", func() { o.metricsPath = p.metricsPath }},
	} {
		if !own.changed(s.theirs) {
			continue
		}
		if own.changed(s.ours) {
			return options{}, fmt.Errorf("--%s and --%s say the same thing: keep one", s.theirs, s.ours)
		}
		s.set()
	}
	if own.changed("webhook-status-code") && (p.statusCode < 100 || p.statusCode > 599) {
		return options{}, fmt.Errorf("--webhook-status-code=%d: give an HTTP status code such as 200", p.statusCode)
	}
	if own.changed("webhook-retries") && p.retries < 1 {
		return options{}, fmt.Errorf("--webhook-retries=%d: must be at least 1", p.retries)
	}
	return o, nil
}

// goFlagSyntax rewrites the single-dash long flags Go's flag package accepts (-volume-dir=/x,
// -webhook-url http://...) to the double dash the reloader's parser takes, for the names in
// long only: fluent-bit's chart and several operators write configmap-reload's flags so. Nothing
// after "--" (the app's command) is touched.
func goFlagSyntax(args []string, long []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") {
			name, _, _ := strings.Cut(a[1:], "=")
			for _, l := range long {
				if name == l {
					a = "-" + a
					break
				}
			}
		}
		out = append(out, a)
	}
	return out
}
