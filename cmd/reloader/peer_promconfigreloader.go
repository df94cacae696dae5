package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	flag "github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/process/netaddr"
)

// The peers whose series the reloader exports beside its own.
const (
	peerConfigmapReload          = "configmap-reload"
	peerPrometheusConfigReloader = "prometheus-config-reloader"
)

// prometheus-config-reloader's defaults, as its main sets them.
const (
	promReloadURL      = "http://127.0.0.1:9090/-/reload"
	promRuntimeInfoURL = "http://127.0.0.1:9090/api/v1/status/runtimeinfo"
	promRetryInterval  = 5 * time.Second
	promReloadTimeout  = 30 * time.Second
)

// promFlags are prometheus-config-reloader's own flags (the Prometheus Operator's reloader,
// over Thanos' pkg/reloader), so that the operator's --prometheus-config-reloader can name this
// image. They land here, apart from the reloader's own options; translate alone turns them into
// options. The migration table in docs/migrating.md says where we differ.
type promFlags struct {
	watchedDirs              []string
	configFile, envsubstFile string
	reloadURL                string
	reloadMethod             string
	processName              string
	runtimeInfoURL           string
	delayInterval            time.Duration
	retryInterval            time.Duration
	reloadTimeout            time.Duration
	ordinalFrom              string
	webConfigFile            string
	memlimitRatio            float64
}

// promOnly are the flags only prometheus-config-reloader has: one of them given makes the
// command line its. --watch-interval and --listen-address are its and ours alike.
var promOnly = []string{"watched-dir", "config-file", "config-envsubst-file", "reload-url", "reload-method", "process-executable-name",
	"runtimeinfo-url", "delay-interval", "retry-interval", "reload-timeout", "statefulset-ordinal-from-envvar",
	"web-config-file", "auto-gomemlimit-ratio"}

func (p *promFlags) add(fs *flag.FlagSet) {
	fs.StringArrayVar(&p.watchedDirs, "watched-dir", nil, "prometheus-config-reloader's name for --volume-dir.")
	fs.StringVar(&p.configFile, "config-file", "", "prometheus-config-reloader's: a config file to watch (its folder is watched); gunzipped and with $(NAME) expanded into --config-envsubst-file; the app is told once at start.")
	fs.StringVar(&p.envsubstFile, "config-envsubst-file", "", "prometheus-config-reloader's: where --config-file is written, gunzipped and with each $(NAME) replaced by environment variable NAME (an unset one is left as written, with a warning); written atomically.")
	fs.StringVar(&p.reloadURL, "reload-url", "", "prometheus-config-reloader's name for --reload-http (default "+promReloadURL+" with its other flags).")
	fs.StringVar(&p.reloadMethod, "reload-method", "http", "prometheus-config-reloader's: http (a POST to --reload-url) or signal (SIGHUP to --process-executable-name, confirmed through --runtimeinfo-url).")
	fs.StringVar(&p.processName, "process-executable-name", "prometheus", "prometheus-config-reloader's: with --reload-method=signal, the command name of the process to signal (as --reload-process).")
	fs.StringVar(&p.runtimeInfoURL, "runtimeinfo-url", promRuntimeInfoURL, "prometheus-config-reloader's: with --reload-method=signal, Prometheus' runtime info, read before and after the signal to confirm the reload worked; empty: not confirmed.")
	fs.DurationVar(&p.delayInterval, "delay-interval", 0, "prometheus-config-reloader's: how long after a file event the folders are read (default 50ms; a kubelet ..data swap is read at once).")
	fs.DurationVar(&p.retryInterval, "retry-interval", promRetryInterval, "prometheus-config-reloader's name for --reload-retry-interval, with its default.")
	fs.DurationVar(&p.reloadTimeout, "reload-timeout", promReloadTimeout, "prometheus-config-reloader's name for --reload-http-timeout, with its default.")
	fs.StringVar(&p.ordinalFrom, "statefulset-ordinal-from-envvar", "POD_NAME", "prometheus-config-reloader's: set $STATEFULSET_ORDINAL_NUMBER, for $(STATEFULSET_ORDINAL_NUMBER) in the config, from the digits that end this variable.")
	fs.StringVar(&p.webConfigFile, "web-config-file", "", "prometheus-config-reloader's: serve --listen-address as this exporter-toolkit web config file says (TLS, client certificates, basic auth); an empty file: plain HTTP.")
	fs.Float64Var(&p.memlimitRatio, "auto-gomemlimit-ratio", 0, "prometheus-config-reloader's: set Go's memory limit to this share (0 to 1) of the container's memory limit; 0 off.")
}

// translate turns a prometheus-config-reloader command line into the reloader's options. It
// returns a new options; own is not changed.
func (p promFlags) translate(own options) (options, error) {
	o := own
	o.peer.name = peerPrometheusConfigReloader
	o.peer.webConfigFile = p.webConfigFile
	if !own.changed("listen-address") {
		o.listenAddress = "" // prometheus-config-reloader serves nothing unless told where
	}
	if p.envsubstFile != "" && p.configFile == "" {
		return options{}, fmt.Errorf("--config-envsubst-file is where --config-file is written: add --config-file")
	}
	o.folders = append(append([]string(nil), own.folders...), p.watchedDirs...)
	if p.configFile != "" {
		in := filepath.Clean(p.configFile)
		o.folders = append(o.folders, filepath.Dir(in))
		o.peer.renderIn, o.peer.renderOut = in, p.envsubstFile
	}
	// Told once at start, after the first scan, with or without --config-file: Thanos' reloader
	// does its first reload at start with one, and at its first watch interval without, so a
	// change made while the sidecar restarted is never lost (ThanosRuler's rules).
	o.peer.tellOnStart = true
	if len(o.folders) == 0 {
		return options{}, fmt.Errorf("nothing to watch: pass --config-file or --watched-dir")
	}
	if p.memlimitRatio < 0 || p.memlimitRatio > 1 {
		return options{}, fmt.Errorf("--auto-gomemlimit-ratio=%v: give a share between 0 and 1", p.memlimitRatio)
	}
	o.peer.ordinalFrom, o.peer.memlimitRatio = p.ordinalFrom, p.memlimitRatio
	if own.watchInterval == 0 {
		// The operator's init container: write the output once and exit, telling nobody.
		o.once, o.peer.tellOnStart = true, false
		o.reloadHTTP, o.reloadProcess = nil, ""
		return o, nil
	}
	if !own.changed("reload-retry-interval") {
		o.retryInterval = p.retryInterval
	}
	if !own.changed("reload-http-timeout") {
		o.reloadTimeout = p.reloadTimeout
	}
	if own.changed("delay-interval") {
		if p.delayInterval < 0 {
			return options{}, fmt.Errorf("--delay-interval=%s: must be 0 or more", p.delayInterval)
		}
		o.peer.settle = p.delayInterval
	}
	var told string // the URL prometheus-config-reloader itself would request
	switch p.reloadMethod {
	case "http":
		switch {
		case p.reloadURL != "":
			o.reloadHTTP = append(append([]string(nil), own.reloadHTTP...), p.reloadURL)
			told = p.reloadURL
		case len(own.reloadHTTP) == 0 && own.reloadProcess == "" && !own.hasApp:
			o.reloadHTTP = []string{promReloadURL}
		}
	case "signal":
		if p.reloadURL != "" {
			return options{}, fmt.Errorf("--reload-url is not used with --reload-method=signal: drop one")
		}
		o.reloadProcess = p.processName
		o.peer.runtimeInfoURL = p.runtimeInfoURL
		told = p.runtimeInfoURL
	default:
		return options{}, fmt.Errorf("--reload-method=%q: use http or signal", p.reloadMethod)
	}
	// What prometheus-config-reloader does with the https URL the operator gives it when
	// Prometheus serves TLS (https://localhost:9090/...): it never checks the certificate, and
	// the operator passes no CA. Kept for that one URL, only on the loopback interface, only
	// when no TLS flag of ours is given, and said once at start: the request never leaves the
	// pod's network namespace. Every other URL is verified, as everywhere in the reloader.
	if !own.tlsGiven() && strings.HasPrefix(told, "https://") && netaddr.IsLoopbackURL(told) {
		o.peer.unverifiedLoopback = told
	}
	return o, nil
}

var trailingDigits = regexp.MustCompile(`\d+$`)

// applyPromProcessSettings does what prometheus-config-reloader's flags ask of the process
// itself, once the command line is checked.
func applyPromProcessSettings(c *config) {
	if c.peer.name != peerPrometheusConfigReloader {
		return
	}
	if c.peer.unverifiedLoopback != "" {
		klog.InfoS("https URL on the loopback interface: its certificate is not verified, as prometheus-config-reloader never verifies it; pass --reload-http-ca-file to verify it")
	}
	if err := setOrdinal(c.peer.ordinalFrom); err != nil {
		klog.InfoS("warning: $STATEFULSET_ORDINAL_NUMBER not set", "err", err.Error())
	}
}

// setOrdinal sets STATEFULSET_ORDINAL_NUMBER from the digits that end $from (prometheus-k8s-1 → 1).
func setOrdinal(from string) error {
	return os.Setenv("STATEFULSET_ORDINAL_NUMBER", trailingDigits.FindString(os.Getenv(from)))
}
