package main

import (
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/kube/configref"
)

func parse(t *testing.T, args ...string) (*config, error) {
	t.Helper()
	return parseAs(t, "reloader", args...)
}

// parseAs reads args as the program argv0 does: parsed, translated from the peer that speaks,
// and checked.
func parseAs(t *testing.T, argv0 string, args ...string) (*config, error) {
	t.Helper()
	cl := newCommandLine()
	require.NoError(t, cl.fs.Parse(cl.args(args)))
	app, err := cl.appArgs()
	if err != nil {
		return nil, err
	}
	o, err := cl.translate(argv0, app)
	if err != nil {
		return nil, err
	}
	return o.check(app)
}

func TestFlags(t *testing.T) {
	root := t.TempDir()
	mounted := func(name string) string { // configmap-reload's folders exist at start
		d := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(d, 0o755))
		return d
	}
	etcConfig, a, b := mounted("etc-config"), mounted("a"), mounted("b")
	t.Setenv("POD_NAMESPACE", "web")
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, c *config)
	}{
		{name: "named sources default to the pod's namespace", args: []string{"--configmap=app", "--secret=ops/tls"},
			check: func(t *testing.T, c *config) {
				assert.Equal(t, []configref.Ref{{Kind: configref.ConfigMap, Namespace: "web", Name: "app"}, {Kind: configref.Secret, Namespace: "ops", Name: "tls"}}, c.refs)
				assert.EqualValues(t, 0o644, c.layout.ConfigMapMode)
				assert.EqualValues(t, 0o600, c.layout.SecretMode)
				assert.Nil(t, c.http)
			}},
		{name: "sidecar defaults", args: []string{"--configmap=app", "--reload-http=http://127.0.0.1:9090/-/reload", "--reload-http-header=Authorization: Bearer x"},
			check: func(t *testing.T, c *config) {
				require.Len(t, c.httpURLs, 1)
				assert.Same(t, c.httpURLs[0], c.http)
				assert.Equal(t, "POST", c.httpURLs[0].Method)
				assert.Equal(t, "Bearer x", c.httpURLs[0].Header.Get("Authorization"))
				assert.Equal(t, 8, c.httpURLs[0].Backoff.Steps)
				assert.Empty(t, c.peer.name)
			}},
		{name: "configmap-reload's arguments as the Prometheus chart renders them",
			args: []string{"--volume-dir=" + etcConfig, "--webhook-url=http://127.0.0.1:9090/-/reload"},
			check: func(t *testing.T, c *config) {
				assert.Equal(t, []string{etcConfig}, c.folders)
				assert.Empty(t, c.root, "nothing is unpacked")
				require.Len(t, c.httpURLs, 1)
				assert.Equal(t, "http://127.0.0.1:9090/-/reload", c.httpURLs[0].URL)
				assert.Equal(t, "POST", c.httpURLs[0].Method)
				assert.Equal(t, peerConfigmapReload, c.peer.name, "configmap-reload's series are exported")
				assert.Equal(t, 3*time.Minute, c.folderOpts.Interval)
			}},
		{name: "configmap-reload's flags in Go's syntax, as fluent-bit's chart writes them",
			args: []string{"-volume-dir=" + etcConfig, "-webhook-url", "http://127.0.0.1:2020/api/v2/reload", "--webhook-method=POST", "-webhook-retries=2"},
			check: func(t *testing.T, c *config) {
				assert.Equal(t, []string{etcConfig}, c.folders)
				require.Len(t, c.httpURLs, 1)
				assert.Equal(t, "http://127.0.0.1:2020/api/v2/reload", c.httpURLs[0].URL)
				assert.Equal(t, 2, c.httpURLs[0].Backoff.Steps)
				assert.Equal(t, peerConfigmapReload, c.peer.name)
			}},
		{name: "configmap-reload's missing volume stops the start", args: []string{"--volume-dir=/does/not/exist", "--webhook-url=http://x/"},
			wantErr: `--volume-dir="/does/not/exist" is not a folder`},
		{name: "our own folder mode waits for a folder to appear", args: []string{"--volume-dir=/does/not/exist", "--reload-http=http://x/"},
			check: func(t *testing.T, c *config) { assert.Equal(t, []string{"/does/not/exist"}, c.folders) }},
		{name: "two peers' flags at once", args: []string{"--volume-dir=/x", "--webhook-url=http://x/", "--reload-url=http://y/"},
			wantErr: "--webhook-url is configmap-reload's and --reload-url prometheus-config-reloader's"},
		{name: "every webhook URL is told; configmap-reload's status code, retries, method and web flags",
			args: []string{"--volume-dir=" + a, "--volume-dir=" + b, "--volume-dir=" + a, "--webhook-url=http://127.0.0.1:1/x", "--webhook-url=http://127.0.0.1:2/y",
				"--webhook-status-code=202", "--webhook-retries=3", "--webhook-method=PUT", "--web.listen-address=127.0.0.1:9999", "--web.telemetry-path=/m",
				"--watch-ignore=token", "--watch-interval=10s"},
			check: func(t *testing.T, c *config) {
				assert.Equal(t, []string{a, b}, c.folders)
				require.Len(t, c.httpURLs, 2)
				assert.Len(t, c.http, 2)
				for _, h := range c.httpURLs {
					assert.True(t, h.Success.Contains(202))
					assert.False(t, h.Success.Contains(200), "only the code configmap-reload was given")
					assert.Equal(t, 3, h.Backoff.Steps)
					assert.Equal(t, "PUT", h.Method)
				}
				assert.Equal(t, "127.0.0.1:9999", c.listen)
				assert.Equal(t, "/m", c.metricsPath)
				assert.Equal(t, []string{"token"}, c.folderOpts.Ignore)
				assert.Equal(t, 10*time.Second, c.folderOpts.Interval)
			}},
		{name: "prometheus-config-reloader's --watched-dir", args: []string{"--watched-dir=/etc/rules", "--reload-process=prometheus"},
			check: func(t *testing.T, c *config) {
				assert.Equal(t, []string{"/etc/rules"}, c.folders)
				assert.True(t, c.tellOnStart, "told once at start without --config-file too (ThanosRuler's rules)")
				assert.Nil(t, c.http, "--reload-process tells the app: no default URL")
			}},
		{name: "prometheus-config-reloader's arguments as the Prometheus Operator renders them",
			args: []string{"--listen-address=:8080", "--reload-url=http://127.0.0.1:9090/-/reload", "--config-file=/etc/prometheus/config/prometheus.yaml.gz",
				"--config-envsubst-file=/etc/prometheus/config_out/prometheus.env.yaml", "--watched-dir=/etc/prometheus/rules/prometheus-k8s-rulefiles-0",
				"--watched-dir=/etc/prometheus/config"},
			check: func(t *testing.T, c *config) {
				assert.Equal(t, []string{"/etc/prometheus/rules/prometheus-k8s-rulefiles-0", "/etc/prometheus/config"}, c.folders)
				assert.Equal(t, "/etc/prometheus/config/prometheus.yaml.gz", c.peer.renderIn)
				assert.Equal(t, "/etc/prometheus/config_out/prometheus.env.yaml", c.peer.renderOut)
				assert.True(t, c.tellOnStart, "one reload at start with --config-file")
				require.Len(t, c.httpURLs, 1)
				assert.Equal(t, "http://127.0.0.1:9090/-/reload", c.httpURLs[0].URL)
				assert.Equal(t, 30*time.Second, c.httpURLs[0].Timeout)
				assert.Equal(t, 5*time.Second, c.retry)
				assert.Equal(t, peerPrometheusConfigReloader, c.peer.name)
				assert.False(t, c.once)
			}},
		{name: "the operator's init container writes the output once and tells nobody",
			args: []string{"--watch-interval=0", "--listen-address=:8081", "--config-file=/etc/prometheus/config/prometheus.yaml.gz",
				"--config-envsubst-file=/etc/prometheus/config_out/prometheus.env.yaml", "--watched-dir=/etc/prometheus/config"},
			check: func(t *testing.T, c *config) {
				assert.True(t, c.once)
				assert.False(t, c.tellOnStart)
				assert.Nil(t, c.http)
				assert.Nil(t, c.process)
			}},
		{name: "prometheus-config-reloader's signal method, confirmed through the runtime info",
			args: []string{"--reload-method=signal", "--config-file=/etc/p/prometheus.yaml", "--log-level=debug"},
			check: func(t *testing.T, c *config) {
				require.NotNil(t, c.process)
				assert.Equal(t, "prometheus", c.process.Name)
				assert.EqualValues(t, 1, c.process.Sig, "SIGHUP")
				assert.Equal(t, "http://127.0.0.1:9090/api/v1/status/runtimeinfo", c.peer.runtimeInfoURL)
				assert.Nil(t, c.http)
			}},
		{name: "prometheus-config-reloader's default reload URL", args: []string{"--watched-dir=/etc/rules", "--delay-interval=2s"},
			check: func(t *testing.T, c *config) {
				require.Len(t, c.httpURLs, 1)
				assert.Equal(t, "http://127.0.0.1:9090/-/reload", c.httpURLs[0].URL)
				assert.Equal(t, 2*time.Second, c.folderOpts.Settle)
			}},
		{name: "a missing web config file stops the start", args: []string{"--watched-dir=/x", "--listen-address=:8080", "--web-config-file=/does/not/exist.yml"}, wantErr: `--web-config-file="/does/not/exist.yml"`},
		{name: "an empty web config file serves plain HTTP", args: []string{"--watched-dir=/x", "--listen-address=:8080", "--web-config-file=/dev/null"},
			check: func(t *testing.T, c *config) { assert.Equal(t, "/dev/null", c.peer.webConfigFile) }},
		{name: "prometheus-config-reloader serves nothing unless told where", args: []string{"--watched-dir=/x"},
			check: func(t *testing.T, c *config) { assert.Empty(t, c.listen) }},
		{name: "an output without an input", args: []string{"--watched-dir=/x", "--config-envsubst-file=/o"}, wantErr: "add --config-file"},
		{name: "a malformed runtime-info URL stops the start, its password never shown", args: []string{"--watched-dir=/x", "--reload-method=signal", "--runtimeinfo-url=http://u:s3cr3t@[::1/x"},
			wantErr: "--runtimeinfo-url="},
		{name: "a runtime-info URL that is not http", args: []string{"--watched-dir=/x", "--reload-method=signal", "--runtimeinfo-url=ftp://u:s3cr3t@host/x"},
			wantErr: `--runtimeinfo-url="ftp://u:xxxxx@host/x": give a full http:// or https:// URL`},
		{name: "a bad reload method", args: []string{"--watched-dir=/x", "--reload-method=grpc"}, wantErr: `--reload-method="grpc": use http or signal`},
		{name: "a reload URL with the signal method", args: []string{"--watched-dir=/x", "--reload-method=signal", "--reload-url=http://x/"}, wantErr: "drop one"},
		{name: "a bad memory limit ratio", args: []string{"--watched-dir=/x", "--auto-gomemlimit-ratio=2"}, wantErr: "between 0 and 1"},
		{name: "a folder in subprocess mode", args: []string{"--volume-dir=/etc/nginx", "--", "nginx"},
			check: func(t *testing.T, c *config) { assert.Equal(t, []string{"nginx"}, c.app) }},
		{name: "folders and API sources", args: []string{"--volume-dir=/x", "--configmap=a", "--reload-http=http://x/"}, wantErr: "one reloader takes one kind of source"},
		{name: "a folder with --configroot", args: []string{"--volume-dir=/x", "--configroot=/y", "--reload-http=http://x/"}, wantErr: "drop --configroot"},
		{name: "a folder with --once", args: []string{"--volume-dir=/x", "--once"}, wantErr: "drop --once"},
		{name: "a folder and nothing to tell", args: []string{"--volume-dir=/x"}, wantErr: "nothing is told when the folder changes"},
		{name: "an empty folder name", args: []string{"--volume-dir=", "--reload-http=http://x/"}, wantErr: "--volume-dir is empty"},
		{name: "a bad ignore glob", args: []string{"--volume-dir=/x", "--reload-http=http://x/", "--watch-ignore=[a-"}, wantErr: `--watch-ignore: ignore glob "[a-"`},
		{name: "an ignore glob without a folder", args: []string{"--configmap=a", "--watch-ignore=token"}, wantErr: "--watch-ignore applies to --volume-dir"},
		{name: "a negative watch interval", args: []string{"--volume-dir=/x", "--reload-http=http://x/", "--watch-interval=-1s"}, wantErr: "--watch-interval=-1s"},
		{name: "status code twice", args: []string{"--volume-dir=/x", "--webhook-url=http://x/", "--webhook-status-code=200", "--reload-http-success-codes=200-299"}, wantErr: "keep one"},
		{name: "retries twice", args: []string{"--volume-dir=/x", "--webhook-url=http://x/", "--webhook-retries=2", "--reload-http-tries=3"}, wantErr: "keep one"},
		{name: "no retries", args: []string{"--volume-dir=/x", "--webhook-url=http://x/", "--webhook-retries=0"}, wantErr: "--webhook-retries=0: must be at least 1"},
		{name: "a bad webhook status code", args: []string{"--volume-dir=/x", "--webhook-url=http://x/", "--webhook-status-code=2000"}, wantErr: "--webhook-status-code"},
		{name: "a metrics path that is not a path", args: []string{"--configmap=a", "--metrics-path=metrics"}, wantErr: `--metrics-path="metrics"`},
		{name: "a metrics path taken by a probe", args: []string{"--configmap=a", "--metrics-path=/healthz"}, wantErr: "taken by the probes"},
		{name: "a query value is never shown", args: []string{"--configmap=a", "--reload-http=ftp://x/?token=s3cr3tvalue"}, wantErr: "token=xxxxx"},
		{name: "selector across namespaces", args: []string{"--selector=grafana_dashboard=1", "--all-namespaces", "--selector-kind=both", "--layout=per-object"},
			check: func(t *testing.T, c *config) {
				require.NotNil(t, c.selector)
				assert.Empty(t, c.selector.Namespaces)
				assert.Len(t, c.selector.Kinds, 2)
				assert.True(t, c.layout.PerObject)
			}},
		{name: "a namespace list, as k8s-sidecar's NAMESPACE=a,b", args: []string{"--selector=grafana_dashboard=1", "--namespace=mon,team-a", "--namespace=team-b,mon", "--configmap=mon/extra"},
			check: func(t *testing.T, c *config) {
				assert.Equal(t, []string{"mon", "team-a", "team-b"}, c.selector.Namespaces)
				assert.Equal(t, "mon", c.refs[0].Namespace)
			}},
		{name: "k8s-sidecar's folder annotation by default, and unique file names", args: []string{"--selector=x=1", "--unique-filenames"},
			check: func(t *testing.T, c *config) {
				assert.Equal(t, "k8s-sidecar-target-directory", c.layout.FolderAnnotation)
				assert.Equal(t, c.root, c.layout.Root)
				assert.True(t, c.layout.UniqueFilenames)
			}},
		{name: "no folder annotation", args: []string{"--selector=x=1", "--folder-annotation="},
			check: func(t *testing.T, c *config) { assert.Empty(t, c.layout.FolderAnnotation) }},
		{name: "a bad folder annotation", args: []string{"--selector=x=1", "--folder-annotation=a b"}, wantErr: `--folder-annotation="a b" is not an annotation name`},
		{name: "a body and basic auth from files", args: []string{"--configmap=a", "--reload-http=http://127.0.0.1:3000/api/admin/provisioning/dashboards/reload", "--reload-http-body={}",
			"--reload-http-username-file=/dev/null", "--reload-http-password-file=/dev/null"},
			check: func(t *testing.T, c *config) {
				h := c.httpURLs[0]
				assert.Equal(t, []byte("{}"), h.Body)
				assert.Equal(t, "/dev/null", h.UsernameFile)
				assert.Equal(t, "/dev/null", h.PasswordFile)
			}},
		{name: "a body from a file", args: []string{"--configmap=a", "--reload-http=http://127.0.0.1:3000/", "--reload-http-body=@/dev/null"},
			check: func(t *testing.T, c *config) {
				assert.Nil(t, c.httpURLs[0].Body)
				assert.Equal(t, "/dev/null", c.httpURLs[0].BodyFile)
			}},
		{name: "a user file without a password file", args: []string{"--configmap=a", "--reload-http=http://127.0.0.1:3000/", "--reload-http-username-file=/dev/null"}, wantErr: "give both, or neither"},
		{name: "a user in the URL and in a file", args: []string{"--configmap=a", "--reload-http=http://u:s3cr3t@127.0.0.1:3000/", "--reload-http-username-file=/dev/null", "--reload-http-password-file=/dev/null"}, wantErr: "keep one"},
		{name: "a body without a request", args: []string{"--configmap=a", "--reload-http-body={}"}, wantErr: "add --reload-http"},
		{name: "a watch idle bound below a second", args: []string{"--configmap=a", "--watch-idle-timeout=10ms"}, wantErr: "--watch-idle-timeout=10ms: give 0 (never) or at least 1s"},
		{name: "one pod first needs the API source", args: []string{"--volume-dir=/etc/config", "--reload-http=http://127.0.0.1:8080/-/reload", "--rollout=one-first"}, wantErr: "--rollout=one-first needs the API source"},
		{name: "a soak setting with a folder", args: []string{"--volume-dir=/etc/config", "--reload-http=http://127.0.0.1:8080/-/reload", "--rollout-soak=5s"}, wantErr: "--rollout-soak applies to --rollout=one-first, which needs the API source"},
		{name: "an unknown rollout", args: []string{"--configmap=a", "--rollout=canary"}, wantErr: `--rollout="canary": use all-at-once or one-first`},
		{name: "a soak setting without one first", args: []string{"--configmap=a", "--rollout-soak=5s"}, wantErr: "--rollout-soak applies to --rollout=one-first"},
		{name: "a soak under a second", args: []string{"--configmap=a", "--rollout=one-first", "--rollout-soak=100ms"}, wantErr: "--rollout-soak=100ms: give at least 1s"},
		{name: "max unavailable zero", args: []string{"--configmap=a", "--rollout=one-first", "--rollout-max-unavailable=0"}, wantErr: `--rollout-max-unavailable="0"`},
		{name: "max unavailable above 100%", args: []string{"--configmap=a", "--rollout=one-first", "--rollout-max-unavailable=150%"}, wantErr: `--rollout-max-unavailable="150%"`},
		{name: "a health URL that is no URL", args: []string{"--configmap=a", "--rollout=one-first", "--health-url=127.0.0.1:8080"}, wantErr: `--health-url="127.0.0.1:8080"`},
		{name: "a health URL timeout without a health URL", args: []string{"--configmap=a", "--rollout=one-first", "--health-url-timeout=2s"}, wantErr: "--health-url-timeout applies to --health-url"},
		{name: "a health URL timeout longer than the soak", args: []string{"--configmap=a", "--rollout=one-first", "--rollout-soak=2s", "--health-url=http://127.0.0.1:8080/healthz", "--health-url-timeout=5s"},
			wantErr: "--health-url-timeout=5s: give more than 0 and at most --rollout-soak (2s)"},
		{name: "a failure threshold of 0", args: []string{"--configmap=a", "--rollout=one-first", "--health-url=http://127.0.0.1:8080/healthz", "--health-url-failure-threshold=0"},
			wantErr: "--health-url-failure-threshold=0: give 1 or more"},
		{name: "a failure threshold a soak cannot reach", args: []string{"--configmap=a", "--rollout=one-first", "--rollout-soak=5s", "--health-url=http://127.0.0.1:8080/healthz", "--health-url-failure-threshold=10"},
			wantErr: "--health-url-failure-threshold=10 with --health-url-timeout=1s needs up to 20s of failures, longer than --rollout-soak=5s"},
		{name: "a health URL's password is not repeated", args: []string{"--configmap=a", "--rollout=one-first", "--health-url=ftp://user:s3cret@host/x"}, wantErr: `--health-url="ftp://host/x"`},
		{name: "a failure threshold without one-first", args: []string{"--configmap=a", "--health-url-failure-threshold=3"}, wantErr: "--health-url-failure-threshold applies to --rollout=one-first"},
		{name: "one first and once", args: []string{"--configmap=a", "--rollout=one-first", "--once"}, wantErr: "--once stops after the first"},
		{name: "watches never ended for silence", args: []string{"--configmap=a", "--watch-idle-timeout=0"},
			check: func(t *testing.T, c *config) { assert.Zero(t, c.watchIdle) }},
		{name: "a name without its namespace among several", args: []string{"--namespace=a,b", "--configmap=app"}, wantErr: `"app" has no namespace, and --namespace lists several: write it as NAMESPACE/app`},
		{name: "a bad namespace in the list", args: []string{"--namespace=a,B_2", "--selector=x=1"}, wantErr: `--namespace: "B_2" is not a namespace name`},
		{name: "subprocess command after --", args: []string{"--configmap=app", "--reload-signal=USR1", "--", "nginx", "-g", "daemon off;"},
			check: func(t *testing.T, c *config) {
				assert.Equal(t, []string{"nginx", "-g", "daemon off;"}, c.app)
				assert.EqualValues(t, 10, c.reloadSig)
			}},
		{name: "items", args: []string{"--configmap=app", "--items=nginx.conf=conf/nginx.conf"},
			check: func(t *testing.T, c *config) { assert.Equal(t, "conf/nginx.conf", c.layout.Items["nginx.conf"]) }},
		{name: "nothing to watch", args: []string{}, wantErr: "nothing to watch: pass --configmap, --secret or --selector, or --volume-dir"},
		{name: "bad name", args: []string{"--configmap=Bad_Name"}, wantErr: `--configmap="Bad_Name"`},
		{name: "bad layout", args: []string{"--configmap=a", "--layout=tree"}, wantErr: `--layout="tree": use flat or per-object`},
		{name: "bad mode", args: []string{"--configmap=a", "--file-mode=rw"}, wantErr: `--file-mode="rw"`},
		{name: "unreadable mode", args: []string{"--configmap=a", "--secret-file-mode=0200"}, wantErr: "at least 0400"},
		{name: "item escaping the root", args: []string{"--configmap=a", "--items=k=../../etc/passwd"}, wantErr: `--items="k=../../etc/passwd"`},
		{name: "item without path", args: []string{"--configmap=a", "--items=k"}, wantErr: "use KEY=REL/PATH"},
		{name: "relative reload URL", args: []string{"--configmap=a", "--reload-http=/-/reload"}, wantErr: "give a full http:// or https:// URL"},
		{name: "bad success codes", args: []string{"--configmap=a", "--reload-http=http://x/", "--reload-http-success-codes=2xx"}, wantErr: "--reload-http-success-codes"},
		{name: "header without colon hides its value", args: []string{"--configmap=a", "--reload-http=http://x/", "--reload-http-header=Authorization Bearer s3cr3t"}, wantErr: "not shown"},
		{name: "header file missing", args: []string{"--configmap=a", "--reload-http=http://x/", "--reload-http-header=X-Token: @/does/not/exist"}, wantErr: `--reload-http-header X-Token: cannot read "/does/not/exist"`},
		{name: "header file relative", args: []string{"--configmap=a", "--reload-http=http://x/", "--reload-http-header=X-Token: @token"}, wantErr: "give the absolute path"},
		{name: "bearer token file missing", args: []string{"--configmap=a", "--reload-http=http://x/", "--reload-http-bearer-token-file=/does/not/exist"}, wantErr: "mount the Secret that holds it there"},
		{name: "unhealthy-after negative", args: []string{"--configmap=a", "--unhealthy-after=-1s"}, wantErr: "--unhealthy-after=-1s"},
		{name: "unhealthy-after with nothing to tell", args: []string{"--configmap=a", "--unhealthy-after=5m"}, wantErr: "--unhealthy-after=5m0s counts failed reloads, and nothing is told to reload"},
		{name: "bearer token file without reload-http", args: []string{"--configmap=a", "--reload-http-bearer-token-file=/x"}, wantErr: "add --reload-http, or drop them"},
		{name: "header without reload-http", args: []string{"--configmap=a", "--reload-http-header=X-Token: t"}, wantErr: "add --reload-http, or drop them"},
		{name: "reload-process with an app", args: []string{"--configmap=a", "--reload-process=nginx", "--", "nginx"}, wantErr: `--reload-process="nginx" signals an app in another container`},
		{name: "reload-process with reload-http", args: []string{"--configmap=a", "--reload-process=nginx", "--reload-http=http://x/"}, wantErr: "keep one"},
		{name: "reload-process as a path", args: []string{"--configmap=a", "--reload-process=/usr/sbin/nginx"}, wantErr: "not a path"},
		{name: "bad signal", args: []string{"--configmap=a", "--reload-signal=RELOAD"}, wantErr: "--reload-signal"},
		{name: "empty selector", args: []string{"--selector="}, wantErr: "nothing to watch"},
		{name: "bad selector", args: []string{"--selector=a in (b"}, wantErr: "--selector="},
		{name: "all-namespaces without selector", args: []string{"--configmap=a", "--all-namespaces"}, wantErr: "--all-namespaces applies to --selector only"},
		{name: "once with an app", args: []string{"--configmap=a", "--once", "--", "app"}, wantErr: "--once unpacks and exits"},
		{name: "missing configroot", args: []string{"--configmap=a", "--configroot=/does/not/exist"}, wantErr: `--configroot="/does/not/exist" is not an existing folder`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if !containsPrefix(args, "--configroot") && !containsPrefix(args, "--volume-dir") && !containsPrefix(args, "-volume-dir") && !containsPrefix(args, "--watched-dir") && !containsPrefix(args, "--config-file") {
				args = append([]string{"--configroot=" + root}, args...)
			}
			checkFlags(t, args, tt.wantErr, tt.check)
		})
	}
}

// checkFlags parses args: an error must contain wantErr and no secret; without one, check
// looks at the config.
func checkFlags(t *testing.T, args []string, wantErr string, check func(*testing.T, *config)) {
	t.Helper()
	c, err := parse(t, args...)
	if wantErr != "" {
		require.Error(t, err)
		assert.Contains(t, err.Error(), wantErr)
		assert.NotContains(t, err.Error(), "s3cr3t")
		return
	}
	require.NoError(t, err)
	check(t, c)
}

func containsPrefix(args []string, p string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, p) {
			return true
		}
	}
	return false
}

// Every flag value is untrusted text from a manifest: whatever the command line, parsing never
// panics, an error is one line that names a flag, and neither a header value nor a URL's
// password is ever repeated in it.
func FuzzReloaderFlags(f *testing.F) {
	root := f.TempDir()
	for _, s := range []string{
		"--configmap=ns/app\n--reload-http=http://127.0.0.1:9090/-/reload",
		"--configmap=Bad_Name",
		"--secret=a/b/c\n--configroot=/nope\nmore",
		"--selector=app in (a,b)\n--selector-kind=both\n--all-namespaces",
		"--configmap=a\n--reload-http=http://user:hunter2@127.0.0.1/\n--reload-http-method=GET POST",
		"--configmap=a\n--reload-http=ftp://user:hunter2@host/",
		"--configmap=a\n--reload-http=http://127.0.0.1/\n--reload-http-header=X-Token hunter2",
		"--configmap=a\n--items=k=../x\n--items=k=y",
		"--configmap=a\n--file-mode=0200\n--secret-file-mode=9",
		"--configmap=a\n--reload-signal=KILL\n--once\n--\napp",
		"--configmap=a\n--debounce=-1s\n--shutdown-grace=0s",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\n")
		if !hasFlag(args, "--configroot") {
			args = append([]string{"--configroot=" + root}, args...)
		}
		cl := newCommandLine()
		cl.fs.SetOutput(io.Discard)
		if err := cl.fs.Parse(cl.args(args)); err != nil {
			assert.NotContains(t, err.Error(), "\n", "one line")
			return
		}
		o := cl.own
		app, err := cl.appArgs()
		if err == nil {
			var translated options
			if translated, err = cl.translate("reloader", app); err == nil {
				_, err = translated.check(app)
			}
		}
		if err == nil {
			return
		}
		msg := err.Error()
		assert.NotContains(t, msg, "\n", "one line")
		assert.Contains(t, msg, "--")
		for _, secret := range secretsIn(o) {
			assert.NotContains(t, msg, secret, "a header value or a URL password was repeated")
		}
	})
}

// secretsIn returns the header values and URL password of o that are long enough, and rare
// enough in the rest of the command line, to be told apart in an error.
func secretsIn(o options) []string {
	var out []string
	for _, h := range o.reloadHeaders {
		if _, v, ok := strings.Cut(h, ":"); ok && !strings.HasPrefix(strings.TrimSpace(v), "@") { // @file names a path, not a secret
			out = append(out, strings.TrimSpace(v))
		}
	}
	var shown []string // the URLs as errors may show them, the password redacted: the user name is no secret
	for _, raw := range o.reloadHTTP {
		if u, err := url.Parse(raw); err == nil {
			if p, ok := u.User.Password(); ok {
				out = append(out, p)
			}
			for _, vs := range u.Query() {
				out = append(out, vs...)
			}
			shown = append(shown, u.Redacted())
		}
	}
	others := strings.Join(append(append(append([]string{o.configRoot, o.reloadMethod, o.selector}, shown...), o.configMaps...), o.secrets...), " ")
	kept := out[:0]
	for _, s := range out {
		if len(s) >= 6 && !strings.Contains(others, s) && !strings.Contains("--reload-http-header --reload-http configmap secret", s) {
			kept = append(kept, s)
		}
	}
	return kept
}

func FuzzParseItem(f *testing.F) {
	for _, s := range []string{"a=b", "k=conf/x.conf", "=x", "k=", "k=../x", "k=/abs", "k=a/../../b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, p, err := parseItem(s)
		if err != nil {
			return
		}
		require.False(t, strings.HasPrefix(p, "/"), "absolute path accepted: %q", p)
		for _, seg := range strings.Split(p, "/") {
			require.NotEqual(t, "..", seg, "parent segment accepted: %q", p)
		}
	})
}

func FuzzParseHeader(f *testing.F) {
	for _, s := range []string{"X-Token: abc", "a:b", ":x", "no colon", "X: a\r\nInjected: 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, value, err := parseHeader(s)
		if err != nil {
			// The input may be a token: the error is one fixed text, whatever the input.
			require.Equal(t, errBadHeader.Error(), err.Error())
			return
		}
		require.NotEmpty(t, name)
		require.NotContains(t, value, "\n")
		require.NotContains(t, value, "\r")
		require.NotContains(t, name, ":")
	})
}

// Invalid flags exit 2 with one line naming the flag; --help and --version exit 0.
func TestInvalidFlagsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"--no-such-flag"},
		{"--configmap=Bad_Name"},
		{"--configmap=a", "--layout=tree"},
		{"--configmap=a", "stray-argument"},
		{"--configmap=a", "stray", "--", "app"},
		{},
	} {
		assert.Equal(t, 2, runMain("reloader", args, noEnv), "%v", args)
	}
	assert.Equal(t, 0, runMain("reloader", []string{"--version"}, noEnv))
	assert.Equal(t, 0, runMain("reloader", []string{"--help"}, noEnv))
}

func TestStatefulSetOrdinalFromEnv(t *testing.T) {
	for in, want := range map[string]string{"prometheus-k8s-12": "12", "prometheus-k8s-0": "0", "no-digits": "", "": ""} {
		t.Setenv("POD_NAME", in)
		t.Setenv("STATEFULSET_ORDINAL_NUMBER", "stale")
		require.NoError(t, setOrdinal("POD_NAME"))
		assert.Equal(t, want, os.Getenv("STATEFULSET_ORDINAL_NUMBER"), in)
	}
}

func TestTLSFlags(t *testing.T) {
	dir := t.TempDir()
	pair := certPair(t, "localhost")
	ca, key, junk := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "junk.crt")
	require.NoError(t, os.WriteFile(ca, []byte(pair["tls.crt"]), 0o600))
	require.NoError(t, os.WriteFile(key, []byte(pair["tls.key"]), 0o600))
	require.NoError(t, os.WriteFile(junk, []byte("s3cr3t"), 0o600))
	url := "--reload-http=https://127.0.0.1:9090/-/reload"
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, c *config)
	}{
		{name: "verified by default, with the system's roots", args: []string{url},
			check: func(t *testing.T, c *config) { assert.Nil(t, c.httpURLs[0].TLS) }},
		{name: "CA file and client certificate, for every URL", args: []string{url, "--reload-http=https://127.0.0.1:8080/reload",
			"--reload-http-ca-file=" + ca, "--reload-http-cert-file=" + ca, "--reload-http-key-file=" + key},
			check: func(t *testing.T, c *config) {
				for _, h := range c.httpURLs {
					require.NotNil(t, h.TLS)
					assert.Equal(t, ca, h.TLS.CAFile)
					assert.False(t, h.TLS.InsecureSkipVerify)
				}
			}},
		{name: "skip-verify only when asked", args: []string{url, "--reload-http-insecure-skip-verify"},
			check: func(t *testing.T, c *config) { assert.True(t, c.httpURLs[0].TLS.InsecureSkipVerify) }},
		{name: "the operator's https URL on loopback is not verified, as prometheus-config-reloader does not",
			args: []string{"--watched-dir=/etc/rules", "--reload-url=https://localhost:9090/-/reload"},
			check: func(t *testing.T, c *config) {
				assert.True(t, c.httpURLs[0].TLS.InsecureSkipVerify)
				assert.Equal(t, "https://localhost:9090/-/reload", c.peer.unverifiedLoopback)
			}},
		{name: "the operator's runtime-info URL on loopback, likewise",
			args:  []string{"--watched-dir=/etc/rules", "--reload-method=signal", "--runtimeinfo-url=https://127.0.0.1:9090/api/v1/status/runtimeinfo"},
			check: func(t *testing.T, c *config) { assert.True(t, c.runtimeInfoTLS.InsecureSkipVerify) }},
		{name: "the exception is the loopback URL's alone: another URL on the same command line is verified",
			args: []string{"--watched-dir=/etc/rules", "--reload-url=https://localhost:9090/-/reload", "--reload-http=https://prometheus.monitoring:9090/-/reload"},
			check: func(t *testing.T, c *config) {
				require.Len(t, c.httpURLs, 2)
				for _, h := range c.httpURLs {
					if h.URL == "https://localhost:9090/-/reload" {
						assert.True(t, h.TLS.InsecureSkipVerify)
					} else {
						assert.Nil(t, h.TLS, "%s is verified with the system's roots", h.URL)
					}
				}
			}},
		{name: "a peer's https URL elsewhere is verified", args: []string{"--watched-dir=/etc/rules", "--reload-url=https://prometheus.monitoring:9090/-/reload"},
			check: func(t *testing.T, c *config) { assert.Nil(t, c.httpURLs[0].TLS) }},
		{name: "a peer's loopback URL with a CA file is verified", args: []string{"--watched-dir=/etc/rules", "--reload-url=https://localhost:9090/-/reload", "--reload-http-ca-file=" + ca},
			check: func(t *testing.T, c *config) {
				assert.False(t, c.httpURLs[0].TLS.InsecureSkipVerify)
				assert.Empty(t, c.peer.unverifiedLoopback)
			}},
		{name: "TLS flags without a reload URL", args: []string{"--reload-process=nginx", "--reload-http-ca-file=" + ca}, wantErr: "go with an https reload URL: add --reload-http"},
		{name: "skip-verify and a CA file", args: []string{url, "--reload-http-insecure-skip-verify", "--reload-http-ca-file=" + ca}, wantErr: "keep one"},
		{name: "a relative path", args: []string{url, "--reload-http-ca-file=ca.crt"}, wantErr: `--reload-http-ca-file="ca.crt": give the absolute path`},
		{name: "a CA file that holds no certificate", args: []string{url, "--reload-http-ca-file=" + junk}, wantErr: "junk.crt holds no PEM certificate"},
		{name: "a missing CA file", args: []string{url, "--reload-http-ca-file=" + filepath.Join(dir, "nope")}, wantErr: "(is the Secret mounted there?)"},
		{name: "a certificate without its key", args: []string{url, "--reload-http-cert-file=" + ca}, wantErr: "go together"},
		{name: "a key file that holds no key", args: []string{url, "--reload-http-cert-file=" + ca, "--reload-http-key-file=" + junk}, wantErr: "no PEM private key in the key file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if !containsPrefix(args, "--watched-dir") {
				args = append([]string{"--configmap=app", "--configroot=" + dir}, args...)
			}
			checkFlags(t, args, tt.wantErr, tt.check)
		})
	}
}

func noEnv(string) string { return "" }
