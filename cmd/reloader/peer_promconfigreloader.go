package main

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	flag "github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/notify"
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

// promOptions are prometheus-config-reloader's own flags.
type promOptions struct {
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

// The Prometheus Operator's prometheus-config-reloader (Thanos' pkg/reloader) takes these flags,
// so that the operator's --prometheus-config-reloader can name this image: each means what it
// means there, over the reloader's pipeline. The migration table in docs/migrating.md says where we differ.
func addPromConfigReloaderFlags(fs *flag.FlagSet, o *options) {
	p := &o.prom
	fs.StringArrayVar(&o.folders, "watched-dir", nil, "prometheus-config-reloader's name for --volume-dir.")
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
	fs.StringVar(&p.webConfigFile, "web-config-file", "", "prometheus-config-reloader's TLS and authentication for --listen-address: not supported; the reloader refuses to start with it.")
	fs.Float64Var(&p.memlimitRatio, "auto-gomemlimit-ratio", 0, "prometheus-config-reloader's: set Go's memory limit to this share (0 to 1) of the container's memory limit; 0 off.")
}

// promFlags are the flags that make the reloader behave as prometheus-config-reloader.
var promFlags = []string{"watched-dir", "config-file", "config-envsubst-file", "reload-url", "reload-method", "process-executable-name",
	"runtimeinfo-url", "delay-interval", "retry-interval", "reload-timeout", "statefulset-ordinal-from-envvar",
	"web-config-file", "auto-gomemlimit-ratio"}

// promConfigReloader turns prometheus-config-reloader's flags into the reloader's, when any is given.
func (o *options) promConfigReloader(c *config) error {
	p := &o.prom
	used := false
	for _, f := range promFlags {
		used = used || o.changed(f)
	}
	if !used {
		return nil
	}
	c.peer = peerPrometheusConfigReloader
	if p.webConfigFile != "" {
		return fmt.Errorf("--web-config-file (TLS and authentication on --listen-address) is not supported: serve the metrics on the pod network without it, or keep prometheus-config-reloader for this pod")
	}
	if p.envsubstFile != "" && p.configFile == "" {
		return fmt.Errorf("--config-envsubst-file is where --config-file is written: add --config-file")
	}
	if p.configFile != "" {
		p.configFile = filepath.Clean(p.configFile)
		o.folders = append(o.folders, filepath.Dir(p.configFile))
		c.renderIn, c.renderOut = p.configFile, p.envsubstFile
		c.tellOnStart = true
	}
	if len(o.folders) == 0 {
		return fmt.Errorf("nothing to watch: pass --config-file or --watched-dir")
	}
	if p.memlimitRatio < 0 || p.memlimitRatio > 1 {
		return fmt.Errorf("--auto-gomemlimit-ratio=%v: give a share between 0 and 1", p.memlimitRatio)
	}
	c.ordinalFrom, c.memlimitRatio = p.ordinalFrom, p.memlimitRatio
	if o.watchInterval == 0 {
		// The operator's init container: write the output once and exit, telling nobody.
		c.once, c.tellOnStart = true, false
		o.reloadHTTP, o.reloadProcess = nil, ""
		return nil
	}
	if !o.changed("reload-retry-interval") {
		o.retryInterval, c.retry = p.retryInterval, p.retryInterval
	}
	if !o.changed("reload-http-timeout") {
		o.reloadTimeout = p.reloadTimeout
	}
	if o.changed("delay-interval") {
		if p.delayInterval < 0 {
			return fmt.Errorf("--delay-interval=%s: must be 0 or more", p.delayInterval)
		}
		c.settle = p.delayInterval
	}
	switch p.reloadMethod {
	case "http":
		if p.reloadURL != "" {
			o.reloadHTTP = append(o.reloadHTTP, p.reloadURL)
		} else if len(o.reloadHTTP) == 0 && o.reloadProcess == "" && len(c.app) == 0 {
			o.reloadHTTP = []string{promReloadURL}
		}
	case "signal":
		if p.reloadURL != "" {
			return fmt.Errorf("--reload-url is not used with --reload-method=signal: drop one")
		}
		o.reloadProcess = p.processName
		c.runtimeInfoURL = p.runtimeInfoURL
	default:
		return fmt.Errorf("--reload-method=%q: use http or signal", p.reloadMethod)
	}
	o.keepPromLoopbackTLS(c)
	return nil
}

// keepPromLoopbackTLS keeps what prometheus-config-reloader does with the https URL the operator
// gives it when Prometheus serves TLS (https://localhost:9090/...): it never checks the
// certificate, and the operator passes no CA. Only for a loopback host, only when no TLS flag of
// ours is given, and said once at start: the request never leaves the pod's network namespace.
// Anything else is verified, as everywhere in the reloader.
func (o *options) keepPromLoopbackTLS(c *config) {
	if o.tls != (notify.TLSFiles{}) || o.changed("reload-http-insecure-skip-verify") {
		return
	}
	raw := c.runtimeInfoURL // --reload-method=signal
	if o.prom.reloadMethod == "http" {
		raw = o.prom.reloadURL
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" {
		return
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() == "localhost" || (ip != nil && ip.IsLoopback()) {
		o.tls.InsecureSkipVerify, c.tlsLoopbackUnverified = true, true
	}
}

var trailingDigits = regexp.MustCompile(`\d+$`)

// applyPromProcessSettings does what prometheus-config-reloader's flags ask of the process
// itself, once the command line is checked.
func applyPromProcessSettings(c *config) {
	if c.peer != peerPrometheusConfigReloader {
		return
	}
	if c.tlsLoopbackUnverified {
		klog.InfoS("https reload URL on the loopback interface: its certificate is not verified, as prometheus-config-reloader never verifies it; pass --reload-http-ca-file to verify it")
	}
	if err := setOrdinal(c.ordinalFrom); err != nil {
		klog.InfoS("warning: $STATEFULSET_ORDINAL_NUMBER not set", "err", err.Error())
	}
	setMemoryLimit(c.memlimitRatio)
}

// setOrdinal sets STATEFULSET_ORDINAL_NUMBER from the digits that end $from (prometheus-k8s-1 → 1).
func setOrdinal(from string) error {
	return os.Setenv("STATEFULSET_ORDINAL_NUMBER", trailingDigits.FindString(os.Getenv(from)))
}

// setMemoryLimit sets Go's soft memory limit to ratio of the container's cgroup limit.
func setMemoryLimit(ratio float64) {
	if ratio <= 0 {
		return
	}
	b, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	limit, perr := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || perr != nil {
		klog.InfoS("warning: --auto-gomemlimit-ratio: no container memory limit found; Go's memory limit is left as it is")
		return
	}
	debug.SetMemoryLimit(int64(ratio * float64(limit)))
}
