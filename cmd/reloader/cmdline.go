package main

import (
	"fmt"
	"path/filepath"
	"strings"

	flag "github.com/spf13/pflag"

	"github.com/configwave/configwave/internal/process/startup"
)

// commandLine is every flag the reloader takes: its own, parsed into options, and each peer's,
// parsed into a struct of that peer's. One peer at most speaks on a command line; its
// translator alone turns its flags into options, so no peer's rule reaches another's URLs.
type commandLine struct {
	fs   *flag.FlagSet
	own  options
	cmr  configmapReloadFlags
	prom promFlags
}

func newCommandLine() *commandLine {
	c := &commandLine{}
	fs := flag.NewFlagSet("reloader", flag.ContinueOnError)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `reloader keeps config files equal to ConfigMaps and Secrets and tells the app to reload.

Sidecar:    reloader --configmap=prometheus --configroot=/etc/prometheus --reload-http=http://127.0.0.1:9090/-/reload
Subprocess: reloader --configmap=nginx --configroot=/etc/nginx -- nginx -g 'daemon off;'
Init:       reloader --configmap=app --configroot=/config --once

Flags:
%s`, fs.FlagUsages())
	}
	addOwnFlags(fs, &c.own)
	c.cmr.add(fs)
	c.prom.add(fs)
	startup.AddLogFlags(fs, "log verbosity: 2 logs each change and request, 4 each watch event.")
	c.own.changed = fs.Changed
	c.fs = fs
	return c
}

// The program names the image gives the reloader besides its own, where a peer's pod spec
// runs it by path: started under one, the command line is that peer's.
const (
	configmapReloadProgram = "configmap-reload"
	promProgram            = "prometheus-config-reloader"
)

// args prepares a command line for parsing: configmap-reload's, as Go's flag package reads it,
// may write its flags with one dash.
func (c *commandLine) args(args []string) []string {
	return goFlagSyntax(args, append([]string{"volume-dir"}, configmapReloadOnly...))
}

// translate turns the parsed command line into the reloader's options, through the one peer
// whose flags were given or whose program name started the reloader; with none, the options
// are the reloader's own flags.
func (c *commandLine) translate(argv0 string, app []string) (options, error) {
	own := c.own
	own.hasApp = len(app) > 0
	program := filepath.Base(argv0)
	cmr, prom := firstGiven(c.fs, configmapReloadOnly), firstGiven(c.fs, promOnly)
	switch {
	case cmr != "" && prom != "":
		return options{}, fmt.Errorf("--%s is configmap-reload's and --%s prometheus-config-reloader's: give one peer's flags, or the reloader's own", cmr, prom)
	case cmr != "" || program == configmapReloadProgram:
		return c.cmr.translate(own)
	case prom != "" || program == promProgram:
		return c.prom.translate(own)
	}
	return own, nil
}

// firstGiven is the first of names given on the command line, or "".
func firstGiven(fs *flag.FlagSet, names []string) string {
	for _, n := range names {
		if fs.Changed(n) {
			return n
		}
	}
	return ""
}

// appArgs splits what follows the flags: the app's command after --, or an error for anything
// else.
func (c *commandLine) appArgs() ([]string, error) {
	fs := c.fs
	if dash := fs.ArgsLenAtDash(); dash >= 0 {
		if dash > 0 {
			return nil, fmt.Errorf("unexpected argument %q before --; the app's command goes after --", fs.Args()[0])
		}
		return fs.Args(), nil
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q; put the app's command after --", fs.Arg(0))
	}
	return nil, nil
}

// k8sSidecarStart turns a start with no arguments and k8s-sidecar's environment into the
// reloader's arguments, and what k8s-sidecar does that no flag of ours says; ok is false for any
// other start.
func k8sSidecarStart(args []string, getenv func(string) string) (sidecar []string, peer peerSettings, ok bool, err error) {
	if len(args) > 0 {
		return nil, peerSettings{}, false, nil
	}
	sidecar, notes, ok, err := k8sSidecarArgs(getenv)
	if err != nil || !ok {
		return nil, peerSettings{}, ok, err
	}
	peer = peerSettings{
		notes:              append([]string{"started with k8s-sidecar's environment, read as " + strings.Join(redactArgs(sidecar), " ")}, notes...),
		createRoot:         true, // k8s-sidecar makes FOLDER (Grafana's chart points it into its emptyDir)
		healthPortOptional: true, // k8s-sidecar runs on without its health port
		insecureAPI:        getenv("SKIP_TLS_VERIFY") == "true",
	}
	if peer.insecureAPI {
		peer.notes = append(peer.notes, "warning: k8s-sidecar's SKIP_TLS_VERIFY=true: the API server's certificate is not verified, as k8s-sidecar does; unset it to verify against the service account's ca.crt")
	}
	return sidecar, peer, true, nil
}
