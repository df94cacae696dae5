package main

import (
	"os"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/configwave/configwave/internal/reloader/notify"
)

// options are the reloader's own flags as given, once a peer's command line, if any, was
// translated into them; config is what they mean once checked.
type options struct {
	configMaps, secrets []string
	selector            string
	selectorKind        string
	namespaces          []string
	folderAnnotation    string
	watchIdleTimeout    time.Duration
	rollout             string
	rolloutSoak         time.Duration
	rolloutMaxBusy      string
	healthURL           string
	healthTimeout       time.Duration
	healthFailures      int
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
	metricsPath         string
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
	reloadOnStart       bool
	hasApp              bool                   // a command after --
	changed             func(name string) bool // whether a flag was given
	// peer is what a peer's command line asks that no flag of ours says; only that peer's
	// translator sets it.
	peer peerSettings
}

// peerSettings are the settings a peer's translator leaves beside the reloader's own options.
type peerSettings struct {
	name        string   // whose series are exported beside ours: peerConfigmapReload, peerPrometheusConfigReloader
	notes       []string // lines to log at start (a peer's environment read)
	tellOnStart bool     // tell the app once the first set is in place
	// prometheus-config-reloader's --config-file and --config-envsubst-file
	renderIn, renderOut string
	runtimeInfoURL      string        // with --reload-method=signal
	settle              time.Duration // --delay-interval
	ordinalFrom         string        // --statefulset-ordinal-from-envvar
	memlimitRatio       float64       // --auto-gomemlimit-ratio
	webConfigFile       string        // --web-config-file: TLS and auth of --listen-address
	createRoot          bool          // k8s-sidecar: --configroot is made when missing
	foldersMustExist    bool          // configmap-reload: a --volume-dir missing at start stops it
	healthPortOptional  bool          // k8s-sidecar: a --listen-address taken by another is not fatal
	insecureAPI         bool          // k8s-sidecar's SKIP_TLS_VERIFY=true
	// unverifiedLoopback is the one https URL on the loopback interface whose certificate is
	// not verified, as prometheus-config-reloader never verifies it.
	unverifiedLoopback string
}

// tlsGiven reports whether any TLS flag of ours was given.
func (o options) tlsGiven() bool {
	return o.tls != (notify.TLSFiles{}) || o.changed("reload-http-insecure-skip-verify")
}

// addOwnFlags registers the reloader's own flags into o.
func addOwnFlags(fs *flag.FlagSet, o *options) {
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
	fs.StringVar(&o.rollout, "rollout", rolloutAllAtOnce, "how the pods of one workload take a new content: all-at-once (each at once, the peers' way), or one-first (one pod lays it out, tells its app and soaks it for --rollout-soak, watching its pod's Ready condition, the reload's answer and --health-url; healthy, the others follow in batches of --rollout-max-unavailable; failed, that pod puts its last good files back and no other pod lays the content out). one-first needs the API source, $POD_NAME and $POD_NAMESPACE from the downward API, and get on its pod and get, watch, create and update on leases (config/reloader-rbac-one-first).")
	fs.DurationVar(&o.rolloutSoak, "rollout-soak", 30*time.Second, "with --rollout=one-first: how long a pod watches its app on a new content before the next pods follow.")
	fs.StringVar(&o.rolloutMaxBusy, "rollout-max-unavailable", "1", "with --rollout=one-first: how many pods take a promoted content at once: a count, or a percentage of the workload's replicas (rounded down, at least 1; needs get on the workload).")
	fs.StringVar(&o.healthURL, "health-url", "", "with --rollout=one-first: a URL of the app that answers 2xx while it is healthy, requested each second during each soak; --health-url-failure-threshold answers in a row that are not 2xx, or not in time, fail the content.")
	fs.DurationVar(&o.healthTimeout, "health-url-timeout", time.Second, "with --health-url: how long one request may take; a slower answer counts as a failure.")
	fs.IntVar(&o.healthFailures, "health-url-failure-threshold", 1, "with --health-url: how many failed requests in a row fail the content (as a probe's failureThreshold); 1: the first.")
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

}
