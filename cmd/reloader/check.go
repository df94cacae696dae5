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

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/reloader/notify"
	"github.com/configwave/configwave/internal/reloader/reload"
	"github.com/configwave/configwave/internal/reloader/source"
	"github.com/configwave/configwave/internal/reloader/unpack"
)

// config is a checked command line: what the reloader runs.
type config struct {
	refs       []configref.Ref
	selector   *source.Selector
	layout     reload.Layout
	root       string
	http       notify.Notifier // nil, one *notify.HTTP, or notify.All of them
	httpURLs   []*notify.HTTP
	folders    []string
	folderOpts source.FolderOptions
	// peer: what a peer's command line asked beyond our options (its name, its config file to
	// render, its runtime-info URL, ...).
	peer           peerSettings
	runtimeInfoTLS *notify.TLSFiles // TLS of peer.runtimeInfoURL; nil: the system's roots
	metricsPath    string
	tellOnStart    bool
	watchIdle      time.Duration
	rollout        rolloutConfig
	process        *notify.NamedProcess
	reloadSig      syscall.Signal
	app            []string // after --
	validate       string
	valTimeout     time.Duration
	debounce       time.Duration
	retry          time.Duration
	unhealthy      time.Duration
	once           bool
	subreaper      bool
	grace          time.Duration
	startupGrace   time.Duration
	listen         string
	kubeconfig     string
}

// check turns options into a config, step by step; every error names the flag and what to do.
func (o *options) check(app []string) (*config, error) {
	c := &config{root: o.configRoot, app: app, validate: o.validateCommand, valTimeout: o.validateTimeout,
		debounce: o.debounce, retry: o.retryInterval, unhealthy: o.unhealthyAfter, once: o.once, subreaper: o.subreaper,
		grace: o.shutdownGrace, startupGrace: o.startupGrace, listen: o.listenAddress, kubeconfig: o.kubeconfig,
		metricsPath: o.metricsPath, watchIdle: o.watchIdleTimeout, peer: o.peer, tellOnStart: o.peer.tellOnStart}
	for _, step := range []func(*config) error{o.checkBuild, o.checkFolders, o.checkSources, o.checkLayout, o.checkTelling, o.checkTiming, o.checkServer} {
		if err := step(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// fullBuildPath is where the image holds the reloader's full build, the one that reads the API
// (internal/build/ociimage).
const fullBuildPath = "/reloader"

// apiFlags are the flags that only the API source reads.
var apiFlags = append([]string{"configmap", "secret", "selector", "selector-kind", "namespace", "all-namespaces", "kubeconfig", "watch-idle-timeout"},
	rolloutFlags...)

// rolloutFlags are --rollout and its tuning, which only the API source can honour.
var rolloutFlags = []string{"rollout", "rollout-soak", "rollout-max-unavailable", "health-url", "health-url-timeout", "health-url-failure-threshold"}

// checkBuild stops the file-only build (the image's /reloader-fileonly, where its
// /configmap-reload and /bin/prometheus-config-reloader lead) at a launch that needs the API,
// naming the program that has it.
func (o *options) checkBuild(*config) error {
	if what, needs := o.needsAPI(); fileOnly && needs {
		return fmt.Errorf("%s needs the Kubernetes API, which this file-only build of the reloader leaves out: run %s, the full build in the same image, or watch a mounted folder with --volume-dir", what, fullBuildPath)
	}
	return nil
}

// needsAPI says whether the launch reads the API, and the first flag that makes it do so.
func (o *options) needsAPI() (string, bool) {
	for _, f := range apiFlags {
		if len(o.folders) > 0 && slices.Contains(rolloutFlags, f) {
			continue // with a folder, checkFolders says why one-first cannot work there
		}
		if o.changed(f) {
			return "--" + f, true
		}
	}
	if len(o.folders) == 0 {
		return "reading ConfigMaps and Secrets", true
	}
	return "", false
}

// checkFolders checks the folder source (--volume-dir and its peers' names).
func (o *options) checkFolders(c *config) error {
	if len(o.folders) == 0 {
		for _, f := range []string{"watch-ignore", "watch-interval"} {
			if o.changed(f) {
				return fmt.Errorf("--%s applies to --volume-dir; add it, or drop --%s", f, f)
			}
		}
		return nil
	}
	for _, f := range []string{"configroot", "items", "layout", "file-mode", "secret-file-mode", "once", "folder-annotation"} {
		if o.changed(f) {
			return fmt.Errorf("--%s applies to --configmap, --secret and --selector, which the reloader unpacks; a --volume-dir is read where it is: drop --%s", f, f)
		}
	}
	if o.rollout == rolloutOneFirst {
		return fmt.Errorf("--rollout=one-first needs the API source: in a mounted folder kubelet changes the files of every pod itself, so no pod can go first; read the ConfigMap or Secret with --configmap, --secret or --selector instead of --volume-dir, or use wave to roll the workload")
	}
	for _, f := range rolloutFlags[1:] {
		if o.changed(f) {
			return fmt.Errorf("--%s applies to --rollout=one-first, which needs the API source: drop --%s", f, f)
		}
	}
	if len(o.configMaps)+len(o.secrets) > 0 || o.selector != "" { // checked before they are parsed
		return fmt.Errorf("--volume-dir watches mounted folders and --configmap, --secret and --selector read the API: one reloader takes one kind of source; run two")
	}
	if o.watchInterval < 0 {
		return fmt.Errorf("--watch-interval=%s: must be 0 (never) or more", o.watchInterval)
	}
	seen := map[string]bool{}
	for _, d := range o.folders {
		if d == "" {
			return fmt.Errorf("--volume-dir is empty: give the folder the volume is mounted at, e.g. /etc/config")
		}
		if !seen[d] {
			seen[d] = true
			c.folders = append(c.folders, d)
		}
		if o.peer.foldersMustExist {
			if st, err := os.Stat(d); err != nil || !st.IsDir() {
				return fmt.Errorf("--volume-dir=%q is not a folder: a mounted volume is there when the container starts, so check the path against the volumeMounts (configmap-reload stops here too)", d)
			}
		}
	}
	c.folderOpts = source.FolderOptions{Ignore: o.watchIgnore, Interval: o.watchInterval, Settle: o.peer.settle}
	if err := source.CheckIgnore(o.watchIgnore); err != nil {
		return fmt.Errorf("--watch-ignore: %w", err)
	}
	if c.peer.name == "" {
		c.peer.name = peerConfigmapReload // a folder is configmap-reload's job: its series too
	}
	c.root = ""
	return nil
}

// checkSources checks what is read from the API: named objects and the selector.
func (o *options) checkSources(c *config) error {
	if o.watchIdleTimeout < 0 || o.watchIdleTimeout > 0 && o.watchIdleTimeout < time.Second {
		return fmt.Errorf("--watch-idle-timeout=%s: give 0 (never) or at least 1s; a healthy watch brings a bookmark about every minute, so 2m or more keeps healthy watches open", o.watchIdleTimeout)
	}
	if err := o.checkAPISources(c); err != nil {
		return err
	}
	if len(c.refs) == 0 && c.selector == nil && len(c.folders) == 0 {
		return fmt.Errorf("nothing to watch: pass --configmap, --secret or --selector, or --volume-dir for a mounted folder")
	}
	return nil
}

// checkLayout checks how objects become files under --configroot.
func (o *options) checkLayout(c *config) error {
	switch o.layout {
	case "flat":
	case "per-object":
		c.layout.PerObject = true
	default:
		return fmt.Errorf("--layout=%q: use flat or per-object", o.layout)
	}
	var err error
	if c.layout.ConfigMapMode, err = parseMode("--file-mode", o.fileMode); err != nil {
		return err
	}
	if c.layout.SecretMode, err = parseMode("--secret-file-mode", o.secretFileMode); err != nil {
		return err
	}
	c.layout.UniqueFilenames = o.uniqueFilenames
	if len(o.items) > 0 {
		c.layout.Items = map[string]string{}
		for _, it := range o.items {
			key, p, err := parseItem(it)
			if err != nil {
				return err
			}
			if prev, dup := c.layout.Items[key]; dup {
				return fmt.Errorf("--items: key %q is mapped twice (to %q and %q); keep one", key, prev, p)
			}
			c.layout.Items[key] = p
		}
	}
	if len(c.folders) == 0 {
		if o.peer.createRoot {
			if err := os.MkdirAll(c.root, 0o755); err != nil {
				return fmt.Errorf("k8s-sidecar's FOLDER=%q cannot be made: %w; mount a writable volume (an emptyDir) at it or above it", c.root, errors.Unwrap(err))
			}
		}
		if st, err := os.Stat(c.root); err != nil || !st.IsDir() {
			return fmt.Errorf("--configroot=%q is not an existing folder: create it (an emptyDir volume in a pod)", c.root)
		}
	}
	return nil
}

// checkTelling checks how the app is told: HTTP requests, a named process, or the child.
func (o *options) checkTelling(c *config) error {
	var err error
	if c.reloadSig, err = notify.ParseSignal(o.reloadSignal); err != nil {
		return fmt.Errorf("--reload-signal: %w", err)
	}
	if len(o.reloadHTTP) > 0 {
		if err := o.httpNotifiers(c); err != nil {
			return err
		}
		c.tellOnStart = c.tellOnStart || o.reloadOnStart
	} else if len(o.reloadHeaders) > 0 || o.bearerTokenFile != "" || o.reloadBody != "" || o.usernameFile != "" || o.passwordFile != "" || o.reloadOnStart {
		return fmt.Errorf("--reload-http-header, --reload-http-bearer-token-file, --reload-http-body and the basic-auth files go with the reload request: add --reload-http, or drop them")
	}
	if raw := c.peer.runtimeInfoURL; raw != "" {
		// The URL may carry a password: a parse error, which repeats it, is not shown.
		if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--runtimeinfo-url=%q: give a full http:// or https:// URL, e.g. %s (an empty value turns the check off)", notify.RedactURL(raw), promRuntimeInfoURL)
		}
	}
	if err := o.checkTLS(c); err != nil {
		return err
	}
	if o.reloadProcess != "" {
		switch {
		case len(c.app) > 0:
			return fmt.Errorf("--reload-process=%q signals an app in another container; with a command after -- the reloader signals its own child: drop one", o.reloadProcess)
		case len(o.reloadHTTP) > 0:
			return fmt.Errorf("--reload-process and --reload-http both tell the app; keep one")
		case strings.ContainsAny(o.reloadProcess, "/\x00") || len(o.reloadProcess) > 255:
			return fmt.Errorf("--reload-process=%q: give the command name (e.g. nginx), not a path", o.reloadProcess)
		}
		c.process = &notify.NamedProcess{Name: o.reloadProcess, Sig: c.reloadSig}
	}
	tells := len(o.reloadHTTP) > 0 || o.reloadProcess != "" || len(c.app) > 0
	switch {
	case o.once && tells:
		return fmt.Errorf("--once unpacks and exits; it takes no --reload-http, --reload-process or command after --")
	case o.unhealthyAfter > 0 && !tells:
		return fmt.Errorf("--unhealthy-after=%s counts failed reloads, and nothing is told to reload: add --reload-http, --reload-process or the app's command after --", o.unhealthyAfter)
	case len(c.folders) > 0 && !c.once && !tells:
		return fmt.Errorf("--volume-dir: nothing is told when the folder changes: add --reload-http (or --webhook-url), --reload-process, or the app's command after --")
	}
	return nil
}

// checkTiming checks the durations.
func (o *options) checkTiming(*config) error {
	switch {
	case o.startupGrace < 0:
		return fmt.Errorf("--startup-grace=%s: must be 0 or more", o.startupGrace)
	case o.shutdownGrace <= 0:
		return fmt.Errorf("--shutdown-grace=%s: must be more than 0", o.shutdownGrace)
	case o.retryInterval <= 0:
		return fmt.Errorf("--reload-retry-interval=%s: must be more than 0", o.retryInterval)
	case o.unhealthyAfter < 0:
		return fmt.Errorf("--unhealthy-after=%s: must be 0 (off) or more", o.unhealthyAfter)
	case o.debounce < 0:
		return fmt.Errorf("--debounce=%s: must be 0 or more", o.debounce)
	}
	return nil
}

// checkServer checks the endpoints: their paths, and a peer's web config.
func (o *options) checkServer(c *config) error {
	if f := o.peer.webConfigFile; f != "" && c.listen != "" {
		if err := checkWebConfig(f); err != nil {
			return err
		}
	}
	if !strings.HasPrefix(o.metricsPath, "/") || strings.ContainsAny(o.metricsPath, " \t\r\n?#") {
		return fmt.Errorf("--metrics-path=%q: give a path such as /metrics", o.metricsPath)
	}
	switch o.metricsPath {
	case "/healthz", "/readyz", "/status":
		return fmt.Errorf("--metrics-path=%q is taken by the probes: pick another path", o.metricsPath)
	}
	return nil
}

// httpNotifiers makes one reload request per --reload-http URL, all with the same settings.
func (o *options) httpNotifiers(c *config) error {
	success, err := notify.ParseCodeSet(o.reloadSuccess)
	if err != nil {
		return fmt.Errorf("--reload-http-success-codes: %w", err)
	}
	tries := o.reloadTries
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
	// A part of basic auth from a file, the other from the URL's user:password@ (k8s-sidecar
	// mixes REQ_USERNAME_FILE with REQ_PASSWORD); each part from one place only.
	urlUser, urlPassword := "", ""
	if u.User != nil {
		urlUser = u.User.Username()
		urlPassword, _ = u.User.Password()
	}
	switch {
	case o.usernameFile != "" && urlUser != "":
		return nil, fmt.Errorf("--reload-http=%q carries a user, and --reload-http-username-file gives one too: keep one", notify.RedactURL(raw))
	case o.passwordFile != "" && urlPassword != "":
		return nil, fmt.Errorf("--reload-http=%q carries a password, and --reload-http-password-file gives one too: keep one", notify.RedactURL(raw))
	case o.usernameFile != "" && o.passwordFile == "" && urlPassword == "", o.passwordFile != "" && o.usernameFile == "" && urlUser == "":
		return nil, fmt.Errorf("--reload-http-username-file and --reload-http-password-file go together (or one of them with the other part in the URL, user:password@): give both, or neither")
	}
	for flagName, file := range map[string]string{"--reload-http-username-file": o.usernameFile, "--reload-http-password-file": o.passwordFile} {
		if file == "" {
			continue
		}
		if err := credentialFile(flagName, file); err != nil {
			return nil, err
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
		// prometheus-config-reloader's one https loopback URL, and only it, goes unverified.
		if u := c.peer.unverifiedLoopback; u != "" {
			unverified := &notify.TLSFiles{InsecureSkipVerify: true}
			for _, h := range c.httpURLs {
				if h.URL == u {
					h.TLS = unverified
				}
			}
			if c.peer.runtimeInfoURL == u {
				c.runtimeInfoTLS = unverified
			}
		}
		return nil
	}
	if len(c.httpURLs) == 0 && c.peer.runtimeInfoURL == "" {
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
	if c.peer.runtimeInfoURL != "" {
		c.runtimeInfoTLS = &t
	}
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
