package main

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/configwave/configwave/internal/reloader/notify"
)

// k8s-sidecar (kiwigrid/k8s-sidecar, the Grafana chart's dashboard sidecar) is configured by its
// environment alone. Started with no arguments and its LABEL set, the reloader reads that
// environment as k8s-sidecar documents it and turns it into its own flags, so that the Grafana
// chart's sidecar.image can point at ours. A variable that asks for what the reloader does not
// do stops the start with one line naming it; one it does not need is said in one line.

// k8sSidecarRefused: the variable, when set to something other than its default, stops the
// start with this line.
var k8sSidecarRefused = map[string]string{
	"SCRIPT":        "the reloader runs no script after a change; run the app's own reload through REQ_URL, or run the reloader as its parent process (reloader ... -- app)",
	"ENABLE_5XX":    "keys ending in .url are written as files, never fetched; put the content in the ConfigMap",
	"RESOURCE_NAME": "name the objects with --configmap=NAMESPACE/NAME and --secret=NAMESPACE/NAME instead",
	"LOG_CONFIG":    "use LOG_LEVEL and LOG_FORMAT",
}

// k8sSidecarNoted: taken, and not needed; one line each at start.
var k8sSidecarNoted = map[string]string{
	"WATCH_SERVER_TIMEOUT":             "the watch is re-opened by client-go's reflector and counted in configwave_reloader_watch_restarts_total",
	"WATCH_CLIENT_TIMEOUT":             "the watch is re-opened by client-go's reflector and counted in configwave_reloader_watch_restarts_total",
	"IGNORE_ALREADY_PROCESSED":         "a pass that finds the same content writes nothing and tells nobody anyway",
	"ERROR_THROTTLE_SLEEP":             "failed watches back off as client-go's reflector does",
	"REQ_RETRY_CONNECT":                "REQ_RETRY_TOTAL counts every try",
	"REQ_RETRY_READ":                   "REQ_RETRY_TOTAL counts every try",
	"REQ_RETRY_BACKOFF_FACTOR":         "tries back off from 0.2 s, doubling, with jitter",
	"SLEEP_TIME":                       "the reloader watches; it never sleeps between lists",
	"LOG_TZ":                           "times are logged in UTC",
	"DISABLE_X509_STRICT_VERIFICATION": "Go's certificate verification applies",
	"KUBECONFIG":                       "read as $KUBECONFIG",
	"REQ_BASIC_AUTH_ENCODING":          "the user name and password are sent as their UTF-8 bytes, the same as latin1 for ASCII ones",
}

// k8sSidecarArgs turns k8s-sidecar's environment into the reloader's arguments; ok is false
// when LABEL is not set (not k8s-sidecar's environment). notes are the lines to log at start.
func k8sSidecarArgs(getenv func(string) string) (args, notes []string, ok bool, err error) {
	label := strings.TrimSpace(getenv("LABEL"))
	if label == "" {
		return nil, nil, false, nil
	}
	for _, name := range slices.Sorted(maps.Keys(k8sSidecarRefused)) {
		v := strings.TrimSpace(getenv(name))
		if v == "" || v == "false" {
			continue
		}
		return nil, nil, true, fmt.Errorf("k8s-sidecar's %s is set: %s", name, k8sSidecarRefused[name])
	}
	for _, name := range slices.Sorted(maps.Keys(k8sSidecarNoted)) {
		if getenv(name) != "" {
			notes = append(notes, fmt.Sprintf("k8s-sidecar's %s is taken and not needed: %s", name, k8sSidecarNoted[name]))
		}
	}
	sel := label
	if v := getenv("LABEL_VALUE"); v != "" {
		sel += "=" + v
	}
	args = append(args, "--selector="+sel)
	folder := strings.TrimSpace(getenv("FOLDER"))
	if folder == "" {
		return nil, nil, true, fmt.Errorf("k8s-sidecar's FOLDER is not set: it names the folder the files go to (an emptyDir the app reads)")
	}
	args = append(args, "--configroot="+folder)
	if v := getenv("FOLDER_ANNOTATION"); v != "" {
		args = append(args, "--folder-annotation="+v)
	}
	switch ns := strings.TrimSpace(getenv("NAMESPACE")); {
	case ns == "ALL":
		args = append(args, "--all-namespaces")
	case ns != "":
		args = append(args, "--namespace="+ns)
	}
	if v := strings.ToLower(strings.TrimSpace(getenv("RESOURCE"))); v != "" {
		args = append(args, "--selector-kind="+v)
	}
	list := false
	switch m := strings.ToUpper(strings.TrimSpace(getenv("METHOD"))); m {
	case "LIST":
		args, list = append(args, "--once"), true
	case "SLEEP":
		notes = append(notes, "k8s-sidecar's METHOD=SLEEP: the reloader watches instead, so changes land at once")
	}
	if b, _ := strconv.ParseBool(getenv("UNIQUE_FILENAMES")); b {
		args = append(args, "--unique-filenames")
	}
	if v := strings.TrimSpace(getenv("DEFAULT_FILE_MODE")); v != "" {
		// Python's int(v, 8), as k8s-sidecar reads it: 644, 0644, 0o644, 0O644 and 6_44 alike.
		v = strings.TrimPrefix(strings.TrimPrefix(strings.ReplaceAll(strings.ToLower(v), "_", ""), "0o"), "0")
		args = append(args, "--file-mode=0"+v, "--secret-file-mode=0"+v)
	} else {
		// k8s-sidecar writes a Secret's keys as any file, 0666 under the usual umask 022.
		args = append(args, "--secret-file-mode=0644")
	}
	port := "8080"
	if v := strings.TrimSpace(getenv("HEALTH_PORT")); v != "" {
		port = v
	}
	args = append(args, "--listen-address="+joinHostPort(getenv("HEALTH_HOST"), port))
	switch strings.ToUpper(strings.TrimSpace(getenv("LOG_FORMAT"))) {
	case "", "JSON":
		args = append(args, "--log-format=json")
	case "LOGFMT":
	default:
		return nil, nil, true, fmt.Errorf("k8s-sidecar's LOG_FORMAT=%q: use JSON or LOGFMT", getenv("LOG_FORMAT"))
	}
	if v := strings.ToLower(strings.TrimSpace(getenv("LOG_LEVEL"))); v != "" {
		switch v {
		case "critical":
			v = "error"
		case "warning":
			v = "warn"
		}
		args = append(args, "--log-level="+v)
	}
	if list {
		if getenv("REQ_URL") != "" {
			notes = append(notes, "k8s-sidecar's METHOD=LIST: the files are written once and the reloader exits; the app, started after it, reads them, so REQ_URL is not requested")
		}
		return args, notes, true, nil
	}
	reqArgs, reqNotes, err := k8sSidecarRequest(getenv)
	if err != nil {
		return nil, nil, true, err
	}
	return append(args, reqArgs...), append(notes, reqNotes...), true, nil
}

// k8sSidecarRequest turns REQ_* into the reload request's flags.
func k8sSidecarRequest(getenv func(string) string) (args, notes []string, err error) {
	raw := strings.TrimSpace(getenv("REQ_URL"))
	if raw == "" {
		// The Grafana chart sets the credentials even when it skips the reload: as k8s-sidecar,
		// nothing is requested.
		for _, v := range []string{"REQ_METHOD", "REQ_PAYLOAD", "REQ_USERNAME", "REQ_PASSWORD", "REQ_USERNAME_FILE", "REQ_PASSWORD_FILE"} {
			if getenv(v) != "" {
				notes = append(notes, fmt.Sprintf("k8s-sidecar's %s is set without REQ_URL: nothing is requested after a change", v))
			}
		}
		return nil, notes, nil
	}
	method := strings.ToUpper(strings.TrimSpace(getenv("REQ_METHOD")))
	switch method {
	case "":
		method = "GET" // k8s-sidecar's default
	case "GET", "POST":
	default:
		return nil, nil, fmt.Errorf("k8s-sidecar's REQ_METHOD=%q: use GET or POST", getenv("REQ_METHOD"))
	}
	// As k8s-sidecar: each part from its file when one is named, else from the environment;
	// basic auth only with both. The environment's parts ride in the URL, which is only ever
	// shown redacted; the files are read on every request.
	user, password := getenv("REQ_USERNAME"), getenv("REQ_PASSWORD")
	userFile, passwordFile := getenv("REQ_USERNAME_FILE"), getenv("REQ_PASSWORD_FILE")
	if userFile != "" {
		user = ""
	}
	if passwordFile != "" {
		password = ""
	}
	if both := (user != "" || userFile != "") && (password != "" || passwordFile != ""); !both {
		if userFile != "" || passwordFile != "" || user != "" || password != "" {
			notes = append(notes, "k8s-sidecar's credentials give a user or a password but not both: no basic auth is sent, as k8s-sidecar sends none")
		}
		user, password, userFile, passwordFile = "", "", "", ""
	}
	if user != "" || password != "" {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("k8s-sidecar's REQ_URL does not parse as a URL (not shown: it may hold a password)")
		}
		u.User = url.UserPassword(user, password)
		raw = u.String()
	}
	args = []string{"--reload-http=" + raw, "--reload-http-method=" + method}
	if userFile != "" {
		args = append(args, "--reload-http-username-file="+userFile)
	}
	if passwordFile != "" {
		args = append(args, "--reload-http-password-file="+passwordFile)
	}
	if p := getenv("REQ_PAYLOAD"); p != "" && method == "POST" {
		args = append(args, "--reload-http-body="+p)
	}
	if v := strings.TrimSpace(getenv("REQ_TIMEOUT")); v != "" {
		s, err := strconv.ParseFloat(v, 64)
		if err != nil || s <= 0 {
			return nil, nil, fmt.Errorf("k8s-sidecar's REQ_TIMEOUT=%q: give seconds, e.g. 10", v)
		}
		args = append(args, fmt.Sprintf("--reload-http-timeout=%gs", s))
	}
	if v := strings.TrimSpace(getenv("REQ_RETRY_TOTAL")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, nil, fmt.Errorf("k8s-sidecar's REQ_RETRY_TOTAL=%q: give a number of retries, e.g. 5", v)
		}
		args = append(args, fmt.Sprintf("--reload-http-tries=%d", n+1))
	}
	if skip, _ := strconv.ParseBool(getenv("REQ_SKIP_TLS_VERIFY")); skip && strings.HasPrefix(raw, "https:") {
		args = append(args, "--reload-http-insecure-skip-verify")
	}
	if skip, _ := strconv.ParseBool(getenv("REQ_SKIP_INIT")); !skip {
		args = append(args, "--reload-http-on-start") // k8s-sidecar's first request, after the first sync
	}
	return args, notes, nil
}

func joinHostPort(host, port string) string {
	host = strings.TrimSpace(host)
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}

// redactArgs shows arguments for the log: a URL's password and query values hidden, a body
// only by its length.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--reload-http="):
			out[i] = "--reload-http=" + notify.RedactURL(strings.TrimPrefix(a, "--reload-http="))
		case strings.HasPrefix(a, "--reload-http-body="):
			out[i] = fmt.Sprintf("--reload-http-body=(%d bytes)", len(a)-len("--reload-http-body="))
		default:
			out[i] = a
		}
	}
	return out
}
