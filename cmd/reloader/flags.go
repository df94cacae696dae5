package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	flag "github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/configwave/configwave/internal/configref"
	"github.com/configwave/configwave/internal/logflags"
	"github.com/configwave/configwave/internal/notify"
	"github.com/configwave/configwave/internal/reload"
	"github.com/configwave/configwave/internal/source"
	"github.com/configwave/configwave/internal/unpack"
)

// options are the command line as given; config is what it means once checked.
type options struct {
	configMaps, secrets []string
	selector            string
	selectorKind        string
	namespaces          []string
	folderAnnotation    string
	watchIdleTimeout    time.Duration
	uniqueFilenames     bool
	allNamespaces       bool
	layout              string
	configRoot          string
	items               []string
	fileMode            string
	secretFileMode      string
	reloadHTTP          []string
	folders             []string
	watchIgnore         []string
	watchInterval       time.Duration
	webhookStatusCode   int
	webhookRetries      int
	metricsPath         string
	prom                promOptions
	changed             func(name string) bool // whether a flag was given
	reloadMethod        string
	reloadHeaders       []string
	bearerTokenFile     string
	reloadBody          string
	usernameFile        string
	passwordFile        string
	tls                 notify.TLSFiles
	reloadTimeout       time.Duration
	reloadSuccess       string
	reloadTries         int
	reloadSignal        string
	reloadProcess       string
	retryInterval       time.Duration
	unhealthyAfter      time.Duration
	validateCommand     string
	validateTimeout     time.Duration
	debounce            time.Duration
	once                bool
	subreaper           bool
	shutdownGrace       time.Duration
	startupGrace        time.Duration
	listenAddress       string
	kubeconfig          string
	version             bool
	notes               []string // lines to log at start (a peer's environment read)
	reloadOnStart       bool
}

func newFlagSet(o *options) *flag.FlagSet {
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
	fs.StringArrayVar(&o.configMaps, "configmap", nil, "ConfigMap to unpack, as [NAMESPACE/]NAME; repeatable. Watched with a single-object watch, so RBAC can name it in resourceNames.")
	fs.StringArrayVar(&o.secrets, "secret", nil, "Secret to unpack, as [NAMESPACE/]NAME; repeatable.")
	fs.StringVar(&o.selector, "selector", "", "also unpack every object whose labels match this selector (e.g. grafana_dashboard=1).")
	fs.StringVar(&o.selectorKind, "selector-kind", "configmap", "what --selector selects: configmap, secret or both.")
	fs.StringSliceVar(&o.namespaces, "namespace", nil, "namespace for names without one and for --selector (default: the pod's own namespace from $POD_NAMESPACE or the service account, else \"default\"). Several, comma-separated or repeated, let --selector match in each (as k8s-sidecar's NAMESPACE=a,b); names then need their namespace, NS/NAME.")
	fs.BoolVar(&o.allNamespaces, "all-namespaces", false, "let --selector match in every namespace.")
	fs.StringVar(&o.layout, "layout", "flat", "flat: every key directly under --configroot; per-object: each object's keys in a folder named after the object.")
	fs.StringVar(&o.configRoot, "configroot", "/config", "folder the keys are unpacked into; it must exist. Files the reloader did not write are never touched.")
	fs.StringArrayVar(&o.folders, "volume-dir", nil, "instead of reading the API, watch this folder that kubelet, a CSI driver or cert-manager mounts (or any folder) and tell the app when what it holds changes; repeatable. Needs no API access: no kubeconfig, no service-account token.")
	fs.StringArrayVar(&o.watchIgnore, "watch-ignore", nil, "with --volume-dir: a glob of files whose changes are not config changes, matched against the path in the folder and the base name (e.g. token, for a projected service-account token); repeatable.")
	fs.DurationVar(&o.watchInterval, "watch-interval", 3*time.Minute, "with --volume-dir: read every folder again this often even without a file event, so that no change is ever lost; 0 never.")
	fs.StringArrayVar(&o.items, "items", nil, "place a key at a relative path instead of its own name, as KEY=REL/PATH; repeatable.")
	fs.StringVar(&o.folderAnnotation, "folder-annotation", "k8s-sidecar-target-directory", "an object with this annotation has its files put in the folder it names (k8s-sidecar's FOLDER_ANNOTATION): relative to --configroot, or absolute under it; a folder outside it leaves the object out. Empty: no annotation is read.")
	fs.DurationVar(&o.watchIdleTimeout, "watch-idle-timeout", 3*time.Minute, "a watch from which neither an event nor a bookmark (the API server sends one about every minute) came for this long is ended and opened again, and counted in configwave_reloader_watch_restarts_total; 0 never. A connection that died silently is found sooner, by client-go's HTTP/2 health check (HTTP2_READ_IDLE_TIMEOUT_SECONDS, HTTP2_PING_TIMEOUT_SECONDS).")
	fs.BoolVar(&o.uniqueFilenames, "unique-filenames", false, "name each file namespace_NS.configmap_NAME.KEY (or .secret_NAME.), so that keys of objects from several namespaces never clash (k8s-sidecar's UNIQUE_FILENAMES).")
	fs.StringVar(&o.fileMode, "file-mode", "0644", "permission bits of files from ConfigMaps, in octal.")
	fs.StringVar(&o.secretFileMode, "secret-file-mode", "0600", "permission bits of files from Secrets, in octal.")
	fs.StringArrayVar(&o.reloadHTTP, "reload-http", nil, "sidecar mode: URL requested after the files changed, e.g. http://127.0.0.1:9090/-/reload; repeatable: each URL is told, each with its own retries. A user:password@ in it is sent as basic auth and never shown.")
	fs.StringVar(&o.reloadMethod, "reload-http-method", "POST", "HTTP method of the reload request.")
	fs.StringArrayVar(&o.reloadHeaders, "reload-http-header", nil, "header sent with the reload request, as \"Name: value\", or \"Name: @/path/to/file\" to read the value from a file (a mounted Secret) on every request; repeatable.")
	fs.StringVar(&o.bearerTokenFile, "reload-http-bearer-token-file", "", "file holding a bearer token for the reload request (a mounted Secret), read again on every request so a rotated token is used at once.")
	fs.BoolVar(&o.reloadOnStart, "reload-http-on-start", false, "send the reload request once the first set is unpacked, as k8s-sidecar does unless REQ_SKIP_INIT=true (the app may have started before its files were there).")
	fs.StringVar(&o.reloadBody, "reload-http-body", "", "body of the reload request (k8s-sidecar's REQ_PAYLOAD), or @/path/to/file to read it from a file on every request; sent as application/json when it is JSON, else text/plain, unless --reload-http-header sets Content-Type.")
	fs.StringVar(&o.usernameFile, "reload-http-username-file", "", "file holding the basic-auth user name of the reload request (a mounted Secret), read on every request; give --reload-http-password-file with it (k8s-sidecar's --req-username-file).")
	fs.StringVar(&o.passwordFile, "reload-http-password-file", "", "file holding the basic-auth password of the reload request, read on every request (k8s-sidecar's --req-password-file).")
	fs.StringVar(&o.tls.CAFile, "reload-http-ca-file", "", "https reload URL: PEM file of the CA that signed the app's certificate (default: the system's roots); read again for every request, so a rotated one is used at once.")
	fs.StringVar(&o.tls.CertFile, "reload-http-cert-file", "", "https reload URL: PEM client certificate, for an app that asks for one (with --reload-http-key-file); read again for every request.")
	fs.StringVar(&o.tls.KeyFile, "reload-http-key-file", "", "https reload URL: PEM key of --reload-http-cert-file.")
	fs.BoolVar(&o.tls.InsecureSkipVerify, "reload-http-insecure-skip-verify", false, "https reload URL: accept any certificate the app shows. Off by default; prefer --reload-http-ca-file.")
	fs.DurationVar(&o.reloadTimeout, "reload-http-timeout", 10*time.Second, "time limit of one reload request.")
	fs.StringVar(&o.reloadSuccess, "reload-http-success-codes", "200-299", "status codes that mean the app reloaded, e.g. 200-299,304.")
	fs.IntVar(&o.reloadTries, "reload-http-tries", 8, "tries of one reload request (exponential backoff from 0.2 s to 10 s with jitter) before giving up until --reload-retry-interval.")
	fs.DurationVar(&o.retryInterval, "reload-retry-interval", 30*time.Second, "how soon a reload that gave up, or a failed write, is tried again without a new change.")
	fs.DurationVar(&o.unhealthyAfter, "unhealthy-after", 0, "fail /healthz once the app has kept failing to reload new config for this long, so that kubelet restarts the pod; 0 never does. A rejected or invalid config never does: the app keeps the last good one.")
	fs.StringVar(&o.reloadProcess, "reload-process", "", "sidecar mode without HTTP: send --reload-signal to the process of this command name in another container (the pod needs shareProcessNamespace: true); exactly one must match, workers forked under the same name aside.")
	fs.StringVar(&o.reloadSignal, "reload-signal", "HUP", "subprocess mode: signal sent to the app after the files changed.")
	fs.StringVar(&o.validateCommand, "validate-command", "", "shell command that checks a new set before it goes live; it runs with sh -c in a folder holding the new files in the same layout, also in $CONFIG_DIR. Non-zero exit keeps the last good set.")
	fs.DurationVar(&o.validateTimeout, "validate-timeout", time.Minute, "time limit of --validate-command.")
	fs.DurationVar(&o.debounce, "debounce", 100*time.Millisecond, "a change after a quiet period is applied at once; changes during a reload or within this time after it are merged into one more reload, once they stop for this long (at most 10 times it); 0 reloads on every change.")
	fs.BoolVar(&o.once, "once", false, "unpack once and exit, for an init container; a missing source is an error.")
	fs.BoolVar(&o.subreaper, "subreaper", os.Getpid() == 1, "subprocess mode: adopt and reap orphaned processes of the app (on by default as PID 1).")
	fs.DurationVar(&o.startupGrace, "startup-grace", 2*time.Second, "subprocess mode: no reload signal is sent sooner than this after the app starts; a change in the meantime is signalled when it runs out (an app that gets SIGHUP before it installs its handler dies of it).")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace", 25*time.Second, "subprocess mode: after forwarding SIGTERM, SIGINT or SIGQUIT, how long the app may take to exit before it is killed (keep it below the pod's terminationGracePeriodSeconds).")
	fs.StringVar(&o.listenAddress, "listen-address", ":9533", "address of /healthz, /readyz, /status and /metrics; empty disables them.")
	fs.StringVar(&o.metricsPath, "metrics-path", "/metrics", "path of the metrics on --listen-address.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; default $KUBECONFIG, ~/.kube/config, else the pod's service account.")
	fs.BoolVar(&o.version, "version", false, "print the version and exit.")

	addConfigmapReloadFlags(fs, o)
	addPromConfigReloaderFlags(fs, o)
	logflags.Add(fs, "log verbosity: 2 logs each change and request, 4 each watch event.")
	o.changed = func(name string) bool { return fs.Changed(name) }
	return fs
}

// config is a checked command line.
type config struct {
	refs     []configref.Ref
	selector *source.Selector
	layout   reload.Layout
	root     string
	http     notify.Notifier // nil, one *notify.HTTP, or notify.All of them
	httpURLs []*notify.HTTP
	tls      *notify.TLSFiles // for https reload and runtime-info URLs
	// tlsLoopbackUnverified: prometheus-config-reloader's https loopback URL, not verified as it
	// never verifies; said once at start.
	tlsLoopbackUnverified bool
	folders               []string
	folderOpts            source.FolderOptions
	peer                  string // whose series are exported beside ours: peerConfigmapReload, peerPrometheusConfigReloader
	metricsPath           string
	// prometheus-config-reloader's --config-file and --config-envsubst-file
	renderIn, renderOut string
	tellOnStart         bool
	watchIdle           time.Duration
	notes               []string      // lines to log at start
	runtimeInfoURL      string        // with --reload-method=signal
	settle              time.Duration // --delay-interval
	ordinalFrom         string        // --statefulset-ordinal-from-envvar
	memlimitRatio       float64       // --auto-gomemlimit-ratio
	process             *notify.NamedProcess
	reloadSig           syscall.Signal
	app                 []string // after --
	validate            string
	valTimeout          time.Duration
	debounce            time.Duration
	retry               time.Duration
	unhealthy           time.Duration
	once                bool
	subreaper           bool
	grace               time.Duration
	startupGrace        time.Duration
	listen              string
	kubeconfig          string
}

// check turns options into a config; every error names the flag and what to do.
func (o *options) check(app []string) (*config, error) {
	var namespaces []string
	for _, n := range o.namespaces {
		if n = strings.TrimSpace(n); n == "" || slices.Contains(namespaces, n) {
			continue
		} else if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			return nil, fmt.Errorf("--namespace: %q is not a namespace name (%s)", n, strings.Join(errs, "; "))
		}
		namespaces = append(namespaces, n)
	}
	if len(namespaces) == 0 {
		namespaces = []string{source.DefaultNamespace()}
	}
	ns := namespaces[0]
	c := &config{root: o.configRoot, app: app, validate: o.validateCommand, valTimeout: o.validateTimeout,
		debounce: o.debounce, retry: o.retryInterval, unhealthy: o.unhealthyAfter, once: o.once, subreaper: o.subreaper, grace: o.shutdownGrace, startupGrace: o.startupGrace, listen: o.listenAddress, kubeconfig: o.kubeconfig,
		metricsPath: o.metricsPath, notes: o.notes, watchIdle: o.watchIdleTimeout}
	if o.watchIdleTimeout < 0 || o.watchIdleTimeout > 0 && o.watchIdleTimeout < time.Second {
		return nil, fmt.Errorf("--watch-idle-timeout=%s: give 0 (never) or at least 1s; a healthy watch brings a bookmark about every minute, so 2m or more keeps healthy watches open", o.watchIdleTimeout)
	}
	if err := o.checkFolders(c); err != nil {
		return nil, err
	}
	for _, s := range slices.Concat(o.configMaps, o.secrets) {
		if len(namespaces) > 1 && !strings.Contains(s, "/") {
			return nil, fmt.Errorf("%q has no namespace, and --namespace lists several: write it as NAMESPACE/%s", s, s)
		}
	}
	for _, s := range o.configMaps {
		r, err := source.ParseRef(configref.ConfigMap, s, ns)
		if err != nil {
			return nil, err
		}
		c.refs = append(c.refs, r)
	}
	for _, s := range o.secrets {
		r, err := source.ParseRef(configref.Secret, s, ns)
		if err != nil {
			return nil, err
		}
		c.refs = append(c.refs, r)
	}
	if o.selector != "" {
		sel, err := labels.Parse(o.selector)
		if err != nil {
			return nil, fmt.Errorf("--selector=%q: %w", o.selector, err)
		}
		if sel.Empty() {
			return nil, fmt.Errorf("--selector=%q selects everything; name a label, e.g. grafana_dashboard=1", o.selector)
		}
		kinds, err := parseSelectorKind(o.selectorKind)
		if err != nil {
			return nil, err
		}
		c.selector = &source.Selector{Kinds: kinds, Namespaces: namespaces, Labels: sel}
		if o.allNamespaces {
			c.selector.Namespaces = nil
		}
	} else if o.allNamespaces {
		return nil, fmt.Errorf("--all-namespaces applies to --selector only; add --selector or drop it")
	}
	if len(c.refs) == 0 && c.selector == nil && len(c.folders) == 0 {
		return nil, fmt.Errorf("nothing to watch: pass --configmap, --secret or --selector, or --volume-dir for a mounted folder")
	}

	switch o.layout {
	case "flat":
	case "per-object":
		c.layout.PerObject = true
	default:
		return nil, fmt.Errorf("--layout=%q: use flat or per-object", o.layout)
	}
	var err error
	if c.layout.ConfigMapMode, err = parseMode("--file-mode", o.fileMode); err != nil {
		return nil, err
	}
	if c.layout.SecretMode, err = parseMode("--secret-file-mode", o.secretFileMode); err != nil {
		return nil, err
	}
	if a := strings.TrimSpace(o.folderAnnotation); a != "" {
		if errs := validation.IsQualifiedName(a); len(errs) > 0 {
			return nil, fmt.Errorf("--folder-annotation=%q is not an annotation name (%s); give one such as k8s-sidecar-target-directory, or empty for none", o.folderAnnotation, strings.Join(errs, "; "))
		}
		c.layout.FolderAnnotation, c.layout.Root = a, filepath.Clean(o.configRoot)
	}
	c.layout.UniqueFilenames = o.uniqueFilenames
	if len(o.items) > 0 {
		c.layout.Items = map[string]string{}
		for _, it := range o.items {
			key, p, err := parseItem(it)
			if err != nil {
				return nil, err
			}
			if prev, dup := c.layout.Items[key]; dup {
				return nil, fmt.Errorf("--items: key %q is mapped twice (to %q and %q); keep one", key, prev, p)
			}
			c.layout.Items[key] = p
		}
	}
	if len(c.folders) > 0 {
		c.root = ""
	} else if st, err := os.Stat(c.root); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("--configroot=%q is not an existing folder: create it (an emptyDir volume in a pod)", c.root)
	}

	if c.reloadSig, err = notify.ParseSignal(o.reloadSignal); err != nil {
		return nil, fmt.Errorf("--reload-signal: %w", err)
	}
	if len(o.reloadHTTP) > 0 {
		if err := o.httpNotifiers(c); err != nil {
			return nil, err
		}
		c.tellOnStart = c.tellOnStart || o.reloadOnStart
	} else if len(o.reloadHeaders) > 0 || o.bearerTokenFile != "" || o.reloadBody != "" || o.usernameFile != "" || o.passwordFile != "" || o.reloadOnStart {
		return nil, fmt.Errorf("--reload-http-header, --reload-http-bearer-token-file, --reload-http-body and the basic-auth files go with the reload request: add --reload-http, or drop them")
	}
	if err := o.checkTLS(c); err != nil {
		return nil, err
	}
	if o.reloadProcess != "" {
		switch {
		case len(app) > 0:
			return nil, fmt.Errorf("--reload-process=%q signals an app in another container; with a command after -- the reloader signals its own child: drop one", o.reloadProcess)
		case len(o.reloadHTTP) > 0:
			return nil, fmt.Errorf("--reload-process and --reload-http both tell the app; keep one")
		case strings.ContainsAny(o.reloadProcess, "/\x00") || len(o.reloadProcess) > 255:
			return nil, fmt.Errorf("--reload-process=%q: give the command name (e.g. nginx), not a path", o.reloadProcess)
		}
		c.process = &notify.NamedProcess{Name: o.reloadProcess, Sig: c.reloadSig}
	}
	if o.once && (len(app) > 0 || len(o.reloadHTTP) > 0 || o.reloadProcess != "") {
		return nil, fmt.Errorf("--once unpacks and exits; it takes no --reload-http, --reload-process or command after --")
	}
	if o.startupGrace < 0 {
		return nil, fmt.Errorf("--startup-grace=%s: must be 0 or more", o.startupGrace)
	}
	if o.shutdownGrace <= 0 {
		return nil, fmt.Errorf("--shutdown-grace=%s: must be more than 0", o.shutdownGrace)
	}
	if o.retryInterval <= 0 {
		return nil, fmt.Errorf("--reload-retry-interval=%s: must be more than 0", o.retryInterval)
	}
	if o.unhealthyAfter < 0 {
		return nil, fmt.Errorf("--unhealthy-after=%s: must be 0 (off) or more", o.unhealthyAfter)
	}
	if o.unhealthyAfter > 0 && len(o.reloadHTTP) == 0 && o.reloadProcess == "" && len(app) == 0 {
		return nil, fmt.Errorf("--unhealthy-after=%s counts failed reloads, and nothing is told to reload: add --reload-http, --reload-process or the app's command after --", o.unhealthyAfter)
	}
	if o.debounce < 0 {
		return nil, fmt.Errorf("--debounce=%s: must be 0 or more", o.debounce)
	}
	if len(c.folders) > 0 && !c.once && len(o.reloadHTTP) == 0 && o.reloadProcess == "" && len(app) == 0 {
		return nil, fmt.Errorf("--volume-dir: nothing is told when the folder changes: add --reload-http (or --webhook-url), --reload-process, or the app's command after --")
	}
	if !strings.HasPrefix(o.metricsPath, "/") || strings.ContainsAny(o.metricsPath, " \t\r\n?#") {
		return nil, fmt.Errorf("--metrics-path=%q: give a path such as /metrics", o.metricsPath)
	}
	switch o.metricsPath {
	case "/healthz", "/readyz", "/status":
		return nil, fmt.Errorf("--metrics-path=%q is taken by the probes: pick another path", o.metricsPath)
	}
	return c, nil
}

// httpNotifiers makes one reload request per --reload-http URL, all with the same settings.
func (o *options) httpNotifiers(c *config) error {
	success, err := notify.ParseCodeSet(o.reloadSuccess)
	if err != nil {
		return fmt.Errorf("--reload-http-success-codes: %w", err)
	}
	tries := o.reloadTries
	if err := o.webhookSettings(&success, &tries); err != nil {
		return err
	}
	var all notify.All
	for _, raw := range o.reloadHTTP {
		h, err := o.httpNotifier(raw, success, tries)
		if err != nil {
			return err
		}
		c.httpURLs = append(c.httpURLs, h)
		all = append(all, h)
	}
	c.http = all
	if len(all) == 1 {
		c.http = all[0]
	}
	return nil
}

func (o *options) httpNotifier(raw string, success notify.CodeSet, tries int) (*notify.HTTP, error) {
	// The URL may carry a password (http://user:pass@host/): it is shown redacted, or not at all.
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--reload-http does not parse as a URL (not shown: it may hold a password); give a full http:// or https:// URL, e.g. http://127.0.0.1:9090/-/reload")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--reload-http=%q: give a full http:// or https:// URL, e.g. http://127.0.0.1:9090/-/reload", notify.RedactURL(raw))
	}
	method := strings.ToUpper(o.reloadMethod)
	if method == "" || strings.ContainsAny(method, " \t\r\n") {
		return nil, fmt.Errorf("--reload-http-method=%q: give an HTTP method such as POST, PUT or GET", o.reloadMethod)
	}
	header := http.Header{}
	var headerFiles map[string]string
	for _, h := range o.reloadHeaders {
		name, value, err := parseHeader(h)
		if err != nil {
			return nil, err
		}
		if file, ok := strings.CutPrefix(value, "@"); ok {
			if err := credentialFile("--reload-http-header "+name, file); err != nil {
				return nil, err
			}
			if headerFiles == nil {
				headerFiles = map[string]string{}
			}
			headerFiles[name] = file
			continue
		}
		header.Add(name, value)
	}
	if o.bearerTokenFile != "" {
		if err := credentialFile("--reload-http-bearer-token-file", o.bearerTokenFile); err != nil {
			return nil, err
		}
	}
	if (o.usernameFile == "") != (o.passwordFile == "") {
		return nil, fmt.Errorf("--reload-http-username-file and --reload-http-password-file go together: give both, or neither")
	}
	if o.usernameFile != "" {
		if u.User != nil {
			return nil, fmt.Errorf("--reload-http=%q carries a user, and --reload-http-username-file gives one too: keep one", notify.RedactURL(raw))
		}
		for flagName, file := range map[string]string{"--reload-http-username-file": o.usernameFile, "--reload-http-password-file": o.passwordFile} {
			if err := credentialFile(flagName, file); err != nil {
				return nil, err
			}
		}
	}
	var body []byte
	bodyFile, fromFile := strings.CutPrefix(o.reloadBody, "@")
	switch {
	case fromFile:
		if err := credentialFile("--reload-http-body", bodyFile); err != nil {
			return nil, err
		}
	case o.reloadBody != "":
		body, bodyFile = []byte(o.reloadBody), ""
	default:
		bodyFile = ""
	}
	if tries < 1 {
		return nil, fmt.Errorf("--reload-http-tries=%d: must be at least 1", tries)
	}
	if o.reloadTimeout <= 0 {
		return nil, fmt.Errorf("--reload-http-timeout=%s: must be more than 0", o.reloadTimeout)
	}
	backoff := notify.DefaultBackoff
	backoff.Steps = tries
	return &notify.HTTP{URL: raw, Method: method, Header: header, HeaderFiles: headerFiles, BearerTokenFile: o.bearerTokenFile,
		UsernameFile: o.usernameFile, PasswordFile: o.passwordFile, Body: body, BodyFile: bodyFile,
		Timeout: o.reloadTimeout, Success: success, Backoff: backoff}, nil
}

// checkTLS reads the TLS files once at start, so that a wrong path or a file that holds no
// certificate fails the start with a clear line rather than every reload later.
func (o *options) checkTLS(c *config) error {
	t := o.tls
	if t == (notify.TLSFiles{}) {
		return nil
	}
	if len(c.httpURLs) == 0 && c.runtimeInfoURL == "" {
		return fmt.Errorf("--reload-http-ca-file, --reload-http-cert-file, --reload-http-key-file and --reload-http-insecure-skip-verify go with an https reload URL: add --reload-http, or drop them")
	}
	if t.InsecureSkipVerify && t.CAFile != "" {
		return fmt.Errorf("--reload-http-insecure-skip-verify accepts any certificate, so --reload-http-ca-file would not be used: keep one (prefer the CA file)")
	}
	for _, f := range []struct{ flag, path string }{{"--reload-http-ca-file", t.CAFile}, {"--reload-http-cert-file", t.CertFile}, {"--reload-http-key-file", t.KeyFile}} {
		if f.path != "" && !filepath.IsAbs(f.path) {
			return fmt.Errorf("%s=%q: give the absolute path of the mounted file, e.g. /etc/reload-tls/ca.crt", f.flag, f.path)
		}
	}
	if _, err := t.Config(); err != nil {
		return err
	}
	for _, h := range c.httpURLs {
		h.TLS = &t
	}
	c.tls = &t
	return nil
}

// credentialFile checks at start that a credential file can be read, so a wrong path fails the
// start with a clear line rather than every reload later. Its content is never shown.
func credentialFile(flagName, path string) error {
	if path == "" || !filepath.IsAbs(path) {
		return fmt.Errorf("%s: give the absolute path of the file that holds the value, e.g. @/var/run/secrets/reload/token", flagName)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: cannot read %q: %w; mount the Secret that holds it there", flagName, path, errors.Unwrap(err))
	}
	return f.Close()
}

func parseSelectorKind(s string) ([]configref.Kind, error) {
	switch strings.ToLower(s) {
	case "configmap", "configmaps":
		return []configref.Kind{configref.ConfigMap}, nil
	case "secret", "secrets":
		return []configref.Kind{configref.Secret}, nil
	case "both":
		return []configref.Kind{configref.ConfigMap, configref.Secret}, nil
	}
	return nil, fmt.Errorf("--selector-kind=%q: use configmap, secret or both", s)
}

// parseMode parses octal permission bits such as 0644 or 644.
func parseMode(flagName, s string) (fs.FileMode, error) {
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || n > 0o777 {
		return 0, fmt.Errorf("%s=%q: give octal permission bits such as 0644", flagName, s)
	}
	if n&0o400 == 0 {
		return 0, fmt.Errorf("%s=%q: the owner could not read the files; give at least 0400", flagName, s)
	}
	return fs.FileMode(n), nil
}

// parseItem parses KEY=REL/PATH.
func parseItem(s string) (key, path string, err error) {
	key, path, ok := strings.Cut(s, "=")
	if !ok || key == "" || path == "" {
		return "", "", fmt.Errorf("--items=%q: use KEY=REL/PATH, e.g. nginx.conf=conf/nginx.conf", s)
	}
	if err := unpack.ValidatePath(path); err != nil {
		return "", "", fmt.Errorf("--items=%q: %w", s, err)
	}
	return key, path, nil
}

var errBadHeader = errors.New(`a --reload-http-header is not "Name: value" on one line (not shown: it may hold a token)`)

// parseHeader parses "Name: value". The value is never echoed: it is often a token.
func parseHeader(s string) (name, value string, err error) {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") || strings.ContainsAny(value, "\r\n") {
		return "", "", errBadHeader
	}
	return textproto.CanonicalMIMEHeaderKey(name), strings.TrimSpace(value), nil
}
