package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/podrefs"
	"github.com/configwave/configwave/internal/wave/rollout"
)

func TestFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, c *config)
	}{
		{name: "defaults watch everything with Wave's hash", args: nil, check: func(t *testing.T, c *config) {
			assert.Empty(t, c.namespaceList)
			assert.True(t, c.selector.Empty())
			assert.Equal(t, confighash.HashWave, c.format)
			assert.True(t, c.crashLoopDetection)
			assert.False(t, c.allowHTTPWebhooks)
			assert.EqualValues(t, 200, c.qps)
			assert.Equal(t, "5m0s", c.syncPeriod.String())
		}},
		{name: "namespaces as Wave spells them", args: []string{"--namespaces=a, b,,c"}, check: func(t *testing.T, c *config) {
			assert.Equal(t, []string{"a", "b", "c"}, c.namespaceList)
		}},
		{name: "label selector", args: []string{"--label-selector=team in (a,b)"}, check: func(t *testing.T, c *config) {
			assert.Equal(t, "team in (a,b)", c.selector.String())
		}},
		{name: "v0.5 hash format", args: []string{"--hash-format=wave-v05"}, check: func(t *testing.T, c *config) {
			assert.Equal(t, confighash.HashWaveV05, c.format)
		}},
		{name: "leader election defaults its namespace", args: []string{"--leader-election"}, check: func(t *testing.T, c *config) {
			assert.NotEmpty(t, c.leaderNamespace)
		}},
		{name: "one dialect", args: []string{"--annotations=stakater"}, check: func(t *testing.T, c *config) {
			assert.Equal(t, rollout.Dialects{Stakater: true}, c.dialects)
		}},
		{name: "both dialects by default", args: nil, check: func(t *testing.T, c *config) {
			assert.Equal(t, rollout.Dialects{Wave: true, Stakater: true}, c.dialects)
		}},
		{name: "an unknown dialect", args: []string{"--annotations=wave,reloader"}, wantErr: `--annotations="wave,reloader": "reloader" is not a dialect; use wave, stakater or both`},
		{name: "no dialect", args: []string{"--annotations="}, wantErr: `--annotations="": name at least one dialect`},
		{name: "Stakater Reloader's flags that mean something here", args: []string{"--namespaces-to-ignore=kube-system, monitoring", "--resources-to-ignore=secrets",
			"--ignored-workload-types=jobs,cronjobs", "--reload-on-create", "--reload-on-delete=false"}, check: func(t *testing.T, c *config) {
			assert.Equal(t, rollout.StakaterOptions{Namespaces: map[string]bool{"kube-system": true, "monitoring": true}, Secrets: true, RollOnCreate: true, IgnoreCronJobs: true, Dialect: podrefs.StakaterDialect{Names: podrefs.DefaultStakaterNames}}, c.stakaterOpts)
		}},
		{name: "Stakater Reloader's profiles flags", args: []string{"--enable-pprof", "--pprof-addr=127.0.0.1:6061"}, check: func(t *testing.T, c *config) {
			assert.True(t, c.stakater.enablePprof)
			assert.Equal(t, "127.0.0.1:6061", c.stakater.pprofAddr)
		}},
		{name: "profiles off by default, on Reloader's port, on loopback unless asked", args: nil, check: func(t *testing.T, c *config) {
			assert.False(t, c.stakater.enablePprof)
			assert.Equal(t, "127.0.0.1:6060", c.stakater.pprofAddr)
		}},
		{name: "crash-loop detection on unless turned off (it lists pods)", args: []string{"--crash-loop-detection=false"}, check: func(t *testing.T, c *config) {
			assert.False(t, c.crashLoopDetection)
		}},
		{name: "Wave's own flags carry over", args: []string{"--leader-election", "--leader-election-id=wave", "--sync-period=10h", "--enable-webhooks", "--zap-log-level=info", "--zap-devel=false"},
			check: func(t *testing.T, c *config) {
				assert.Equal(t, []string{"--enable-webhooks", "--zap-devel", "--zap-log-level"}, c.waveOnly.given())
				assert.Equal(t, 10*time.Hour, c.syncPeriod)
			}},
		{name: "Reloader's --is-Argo-Rollouts is accepted: discovery finds them", args: []string{"--is-Argo-Rollouts=true"}, check: func(t *testing.T, c *config) {
			assert.Equal(t, "true", c.stakater.isArgoRollouts)
		}},
		{name: "Wave's cluster-wide rollout limit", args: []string{"--update-rate=0.5", "--update-burst=3"}, check: func(t *testing.T, c *config) {
			assert.Equal(t, 0.5, c.updateRate)
			assert.Equal(t, 3, c.updateBurst)
		}},
		{name: "an http:// webhook to another host", args: []string{"--notify-webhook=http://chat.example/hooks/T0/SECRET"},
			wantErr: "--notify-webhook: an http:// URL to chat.example: the alerts and the URL, often the credential itself, would cross the network unencrypted; use https://, or start wave with --allow-http-webhooks"},
		{name: "... accepted when asked", args: []string{"--notify-webhook=http://chat.example/hook", "--allow-http-webhooks"}, check: func(t *testing.T, c *config) {
			assert.Equal(t, "http://chat.example", c.webhook.Host())
		}},
		{name: "a negative rate", args: []string{"--update-rate=-1"}, wantErr: "--update-rate=-1 --update-burst=1: use a rate of 0 (no limit) or more rollouts per second"},
		{name: "a zero burst", args: []string{"--update-rate=1", "--update-burst=0"}, wantErr: "a burst of at least 1"},
		{name: "Wave's --metrics-addr is --listen-address", args: []string{"--metrics-addr=:9090"}, check: func(t *testing.T, c *config) {
			assert.Equal(t, ":9090", c.listenAddress)
		}},
		{name: "--metrics-addr against --listen-address", args: []string{"--metrics-addr=:9090", "--listen-address=:9091"}, wantErr: `--metrics-addr=":9090" and --listen-address=":9091": give only --listen-address`},
		{name: "Reloader's selectors, in its syntax", args: []string{"--namespace-selector=team:a,env:*", "--resource-label-selector=reloader=enabled"},
			check: func(t *testing.T, c *config) {
				assert.Equal(t, "env,team=a", c.stakaterOpts.NamespaceSelector.String())
				assert.Equal(t, "reloader=enabled", c.stakaterOpts.ResourceSelector.String())
			}},
		{name: "a bad selector", args: []string{"--namespace-selector=team:a b"}, wantErr: `--namespace-selector="team:a b"`},
		{name: "Reloader's --enable-ha elects on Reloader's Lease", args: []string{"--enable-ha=true"},
			check: func(t *testing.T, c *config) {
				assert.True(t, c.leaderElection)
				assert.Equal(t, "stakater-reloader-lock", c.leaderID)
			}},
		{name: "--enable-ha with a Lease of our own", args: []string{"--enable-ha", "--leader-election-id=wave"},
			check: func(t *testing.T, c *config) {
				assert.True(t, c.leaderElection)
				assert.Equal(t, "wave", c.leaderID)
			}},
		{name: "a bad --enable-ha", args: []string{"--enable-ha=yes please"}, wantErr: `--enable-ha="yes please": use true or false`},
		{name: "Reloader's --enable-csi-integration, as its chart renders it", args: []string{"--enable-csi-integration=true"},
			check: func(t *testing.T, c *config) { assert.True(t, c.csi) }},
		{name: "--enable-csi-integration without a value", args: []string{"--enable-csi-integration"},
			check: func(t *testing.T, c *config) { assert.True(t, c.csi) }},
		{name: "CSI off by default, as in Reloader", args: nil,
			check: func(t *testing.T, c *config) { assert.False(t, c.csi) }},
		{name: "a bad --enable-csi-integration", args: []string{"--enable-csi-integration=on"}, wantErr: `--enable-csi-integration="on": use true or false`},
		{name: "Reloader's chart arguments by default: --log-level=info",
			args:  []string{"--log-level=info"},
			check: func(t *testing.T, c *config) { assert.False(t, c.leaderElection) }},
		{name: "Reloader's --auto-reload-all", args: []string{"--auto-reload-all"},
			check: func(t *testing.T, c *config) { assert.True(t, c.stakaterOpts.Dialect.AutoReloadAll) }},
		{name: "Reloader's annotation names, as its chart renders them (flag, then value)",
			args: []string{"--configmap-annotation", "example.com/configmaps", "--auto-annotation", "example.com/auto", "--pause-deployment-annotation", "example.com/pause",
				"--pause-deployment-time-annotation", "example.com/paused-at", "--reload-strategy=annotations", "--sync-after-restart"},
			check: func(t *testing.T, c *config) {
				n := c.stakaterOpts.Dialect.Names
				assert.Equal(t, "example.com/configmaps", n.ConfigMapReload)
				assert.Equal(t, "example.com/auto", n.Auto)
				assert.Equal(t, "example.com/pause", n.PausePeriod)
				assert.Equal(t, podrefs.StakaterSecretReload, n.SecretReload, "the others keep Reloader's defaults")
				assert.False(t, c.stakaterOpts.Dialect.AutoReloadAll)
				assert.Equal(t, "example.com/paused-at", n.PausedAt)
				assert.Len(t, c.stakater.notes(), 2, "one line each for the flags that change nothing")
			}},
		{name: "a bad annotation name", args: []string{"--ignore-annotation=not a name"}, wantErr: `--ignore-annotation="not a name" is not an annotation name`},
		{name: "a bad --auto-reload-all", args: []string{"--auto-reload-all=sometimes"}, wantErr: `--auto-reload-all="sometimes": use true or false`},
		{name: "Reloader's --webhook-url, as its chart renders it (flag, then value)", args: []string{"--webhook-url", "https://hooks.example.com/x"},
			check: func(t *testing.T, c *config) {
				require.NotNil(t, c.changeWebhook)
				assert.Equal(t, "https://hooks.example.com", c.changeWebhook.Host())
			}},
		{name: "--webhook-url over http to another host", args: []string{"--webhook-url=http://hooks.example.com/x"}, wantErr: "--webhook-url: an http:// URL to hooks.example.com"},
		{name: "a bad resource to ignore", args: []string{"--resources-to-ignore=pods"}, wantErr: `--resources-to-ignore: "pods" is not configmaps or secrets`},
		{name: "a bad workload type", args: []string{"--ignored-workload-types=deployments"}, wantErr: `--ignored-workload-types: "deployments" is not jobs or cronjobs`},
		{name: "a bad boolean", args: []string{"--reload-on-create=maybe"}, wantErr: `--reload-on-create="maybe": use true or false`},
		{name: "coalesce above 1s", args: []string{"--coalesce=2s"}, wantErr: "--coalesce=2s: use 0 (roll at once) up to 1s"},
		{name: "bad namespace", args: []string{"--namespaces=Prod"}, wantErr: `--namespaces: "Prod" is not a namespace name`},
		{name: "bad selector", args: []string{"--label-selector=a in (b"}, wantErr: "--label-selector="},
		{name: "bad hash format", args: []string{"--hash-format=md5"}, wantErr: `--hash-format="md5": use "wave"`},
		{name: "sync period too short", args: []string{"--sync-period=10ms"}, wantErr: "--sync-period=10ms"},
		{name: "no workers", args: []string{"--workers=0"}, wantErr: "--workers=0"},
		{name: "lease timing", args: []string{"--leader-election", "--leader-election-renew-deadline=20s"}, wantErr: "lease-duration > --leader-election-renew-deadline"},
		{name: "renew deadline within the retries' jitter", args: []string{"--leader-election", "--leader-election-renew-deadline=2100ms"}, wantErr: "1.2 × --leader-election-retry-period"},
		{name: "lease shorter than a second", args: []string{"--leader-election", "--leader-election-lease-duration=900ms", "--leader-election-renew-deadline=800ms", "--leader-election-retry-period=100ms"}, wantErr: "at least 1s"},
		{name: "missing hash key file", args: []string{"--hash-key-file=/does/not/exist"}, wantErr: `--hash-key-file="/does/not/exist": read the key from /does/not/exist: no such file or directory (is the Secret mounted there?)`},
		{name: "lease name", args: []string{"--leader-election", "--leader-election-id=Bad Name"}, wantErr: "--leader-election-id"},
		{name: "the webhook's certificate made by wave, as the chart renders it", args: []string{"--revisions-webhook-address=:9443",
			"--revisions-webhook-cert-secret=configwave-system/cw-webhook-cert", "--revisions-webhook-service=cw-webhook", "--revisions-webhook-configuration=cw-revisions"},
			check: func(t *testing.T, c *config) {
				assert.Equal(t, "configwave-system", c.webhookCertNS)
				assert.Equal(t, "cw-webhook-cert", c.webhookCertName)
			}},
		{name: "the webhook's certificate without the webhook", args: []string{"--revisions-webhook-cert-secret=cert", "--revisions-webhook-service=cw"},
			wantErr: `--revisions-webhook-cert-secret="cert": the webhook is not served; give --revisions-webhook-address too`},
		{name: "the webhook's certificate without its Service", args: []string{"--revisions-webhook-address=:9443", "--revisions-webhook-cert-secret=cert"},
			wantErr: `--revisions-webhook-service="": give the name of the webhook's Service in namespace`},
		{name: "a Service for a certificate wave does not make", args: []string{"--revisions-webhook-address=:9443", "--revisions-webhook-service=cw"},
			wantErr: "go with --revisions-webhook-cert-secret"},
		{name: "a bad certificate Secret", args: []string{"--revisions-webhook-address=:9443", "--revisions-webhook-cert-secret=a/b/c", "--revisions-webhook-service=cw"},
			wantErr: `--revisions-webhook-cert-secret="a/b/c": give a Secret as NAME or NAMESPACE/NAME`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o options
			fs := newFlagSet(&o)
			require.NoError(t, fs.Parse(tt.args))
			c, err := o.check()
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

func TestHashKeyFile(t *testing.T) {
	dir := t.TempDir()
	short, long, huge := filepath.Join(dir, "short"), filepath.Join(dir, "long"), filepath.Join(dir, "huge")
	require.NoError(t, os.WriteFile(short, []byte("abc\n"), 0o600))
	require.NoError(t, os.WriteFile(long, []byte("0123456789abcdef0123\n"), 0o600))
	require.NoError(t, os.WriteFile(huge, bytes.Repeat([]byte("abc"), 10000), 0o600))
	for path, want := range map[string]string{short: "use at least 16 random bytes", long: "", huge: huge + " is larger than 4096 bytes; is it the key?"} {
		var o options
		require.NoError(t, newFlagSet(&o).Parse([]string{"--hash-key-file=" + path}))
		c, err := o.check()
		if want != "" {
			assert.ErrorContains(t, err, want)
			assert.NotContains(t, err.Error(), "abc", "the key never appears in an error")
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, []byte("0123456789abcdef0123"), c.hashKey)
	}
}

func TestInvalidFlagsExit2(t *testing.T) {
	assert.Equal(t, 2, runMain([]string{"--no-such-flag"}))
	assert.Equal(t, 2, runMain([]string{"--hash-format=md5"}))
	assert.Equal(t, 2, runMain([]string{"extra-arg"}))
	assert.Equal(t, 0, runMain([]string{"--version"}))
}

// Every flag value is untrusted text from a manifest: whatever the command line, parsing never
// panics, and an error is one line that names a flag.
func FuzzWaveFlags(f *testing.F) {
	for _, s := range []string{
		"--namespaces=a,b\n--label-selector=app in (x,y)",
		"--namespaces=Bad_NS",
		"--hash-format=md5",
		"--sync-period=0s\n--workers=0",
		"--leader-election\n--leader-election-id=UPPER",
		"--label-selector=a!=\n",
		"--hash-key-file=/dev/null",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var o options
		fs := newFlagSet(&o)
		fs.SetOutput(io.Discard)
		if err := fs.Parse(strings.Split(line, "\n")); err != nil {
			assert.NotContains(t, err.Error(), "\n", "one line")
			return
		}
		if _, err := o.check(); err != nil {
			assert.NotContains(t, err.Error(), "\n", "one line")
			assert.Contains(t, err.Error(), "--")
		}
	})
}

// Stakater Reloader's chart sets its container's environment; wave reads it as Reloader does.
func TestStakaterChartEnv(t *testing.T) {
	tests := []struct {
		name           string
		env            map[string]string
		args           []string
		wantNamespaces []string
		wantListen     string
		wantByNS       bool
	}{
		{name: "not started by the chart", wantListen: ""},
		{name: "the chart, watching globally", env: map[string]string{"RELOADER_DEPLOYMENT_NAME": "reloader-reloader", "RELOADER_NAMESPACE": "tools"}, wantListen: ":9090"},
		{name: "watchGlobally: false scopes wave to the namespace", env: map[string]string{"RELOADER_DEPLOYMENT_NAME": "r", "KUBERNETES_NAMESPACE": "tools"},
			wantNamespaces: []string{"tools"}, wantListen: ":9090"},
		{name: "--namespaces wins", env: map[string]string{"KUBERNETES_NAMESPACE": "tools"}, args: []string{"--namespaces=a,b"}, wantNamespaces: []string{"a", "b"}, wantListen: ":9090"},
		{name: "the chart before 2.2 (no RELOADER_DEPLOYMENT_NAME), watchGlobally: false", env: map[string]string{"KUBERNETES_NAMESPACE": "tools"},
			args: []string{"--log-level=info"}, wantNamespaces: []string{"tools"}, wantListen: ":9090"},
		{name: "the chart before 2.2, watching globally: its --log-level says it", args: []string{"--log-level=info"}, wantListen: ":9090"},
		{name: "one listener when both addresses are the same", env: map[string]string{"RELOADER_DEPLOYMENT_NAME": "r"}, args: []string{"--listen-address=:9090"}},
		{name: "enableMetricsByNamespace", env: map[string]string{"RELOADER_DEPLOYMENT_NAME": "r", "METRICS_COUNT_BY_NAMESPACE": "enabled"}, wantListen: ":9090", wantByNS: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o options
			fs := newFlagSet(&o)
			o.getenv = func(k string) string { return tt.env[k] }
			require.NoError(t, fs.Parse(tt.args))
			c, err := o.check()
			require.NoError(t, err)
			assert.Equal(t, tt.wantNamespaces, c.namespaceList)
			assert.Equal(t, tt.wantListen, c.stakaterListen)
			assert.Equal(t, tt.wantByNS, c.countByNamespace)
		})
	}
}

// ALERT_ON_RELOAD=true with no ALERT_WEBHOOK_URL stops the start with one line naming both.
func TestStakaterAlertEnvWithoutURL(t *testing.T) {
	var o options
	fs := newFlagSet(&o)
	o.getenv = func(k string) string { return map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_SINK": "slack"}[k] }
	require.NoError(t, fs.Parse(nil))
	_, err := o.check()
	require.ErrorContains(t, err, "ALERT_ON_RELOAD is true but ALERT_WEBHOOK_URL is empty")
}

func TestK8sSidecarStartHandsOver(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	sidecar := map[string]string{"LABEL": "grafana_dashboard", "FOLDER": "/tmp/dashboards"}
	assert.True(t, k8sSidecarStart(nil, env(sidecar)))
	assert.False(t, k8sSidecarStart([]string{"--namespaces=a"}, env(sidecar)), "with arguments it is wave's start")
	assert.False(t, k8sSidecarStart(nil, env(map[string]string{"LABEL": "x"})), "LABEL alone is not k8s-sidecar's")
	assert.False(t, k8sSidecarStart(nil, env(nil)))
}
