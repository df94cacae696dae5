package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestK8sSidecarArgs(t *testing.T) {
	// The Grafana chart's dashboard sidecar, as its values render it by default (with the
	// reload API on).
	grafana := map[string]string{
		"METHOD": "WATCH", "LABEL": "grafana_dashboard", "LABEL_VALUE": "1", "FOLDER": "/tmp/dashboards", "RESOURCE": "both",
		"REQ_USERNAME": "admin", "REQ_PASSWORD": "s3cr3t", "REQ_URL": "http://localhost:3000/api/admin/provisioning/dashboards/reload",
		"REQ_METHOD": "POST",
	}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range grafana {
			out[k] = v
		}
		for k, v := range extra {
			if v == "" {
				delete(out, k)
			} else {
				out[k] = v
			}
		}
		return out
	}
	tests := []struct {
		name      string
		env       map[string]string
		notK8s    bool
		want      []string
		wantNotes []string
		wantErr   string
	}{
		{name: "no LABEL: not k8s-sidecar's environment", env: map[string]string{"FOLDER": "/x"}, notK8s: true},
		{name: "the Grafana chart's sidecar", env: grafana, want: []string{
			"--selector=grafana_dashboard=1", "--configroot=/tmp/dashboards", "--selector-kind=both", "--secret-file-mode=0644", "--listen-address=:8080", "--log-format=json",
			"--reload-http=http://admin:s3cr3t@localhost:3000/api/admin/provisioning/dashboards/reload", "--reload-http-method=POST", "--reload-http-on-start"}},
		{name: "any value of the label, all namespaces, unique names, a file mode, a folder annotation, logfmt, debug, LIST",
			env: map[string]string{"LABEL": "dash", "FOLDER": "/d", "NAMESPACE": "ALL", "UNIQUE_FILENAMES": "true", "DEFAULT_FILE_MODE": "440",
				"FOLDER_ANNOTATION": "grafana_folder", "LOG_FORMAT": "LOGFMT", "LOG_LEVEL": "DEBUG", "METHOD": "LIST", "HEALTH_PORT": "9999", "HEALTH_HOST": "::"},
			want: []string{"--selector=dash", "--configroot=/d", "--folder-annotation=grafana_folder", "--all-namespaces", "--once", "--unique-filenames",
				"--file-mode=0440", "--secret-file-mode=0440", "--listen-address=[::]:9999", "--log-level=debug"}},
		{name: "DEFAULT_FILE_MODE in Python's other octal spellings, as int(v, 8) reads them", env: map[string]string{"LABEL": "x", "FOLDER": "/d", "DEFAULT_FILE_MODE": "0O6_40"},
			want: []string{"--selector=x", "--configroot=/d", "--file-mode=0640", "--secret-file-mode=0640", "--listen-address=:8080", "--log-format=json"}},
		{name: "a namespace list; GET by default; credentials from files; a payload only with POST; retries and timeout; no first request",
			env: map[string]string{"LABEL": "x", "FOLDER": "/d", "NAMESPACE": "a,b", "REQ_URL": "http://127.0.0.1:3000/r", "REQ_PAYLOAD": "{}",
				"REQ_USERNAME": "ignored", "REQ_USERNAME_FILE": "/s/user", "REQ_PASSWORD_FILE": "/s/pw", "REQ_TIMEOUT": "2.5", "REQ_RETRY_TOTAL": "3", "REQ_SKIP_INIT": "true"},
			want: []string{"--selector=x", "--configroot=/d", "--namespace=a,b", "--secret-file-mode=0644", "--listen-address=:8080", "--log-format=json",
				"--reload-http=http://127.0.0.1:3000/r", "--reload-http-method=GET", "--reload-http-username-file=/s/user", "--reload-http-password-file=/s/pw",
				"--reload-http-timeout=2.5s", "--reload-http-tries=4"}},
		{name: "SLEEP and the watch tuning are taken, each said in one line", env: with(map[string]string{"METHOD": "SLEEP", "SLEEP_TIME": "30", "WATCH_SERVER_TIMEOUT": "60", "REQ_BASIC_AUTH_ENCODING": "latin1"}),
			wantNotes: []string{"k8s-sidecar's SLEEP_TIME is taken and not needed", "k8s-sidecar's WATCH_SERVER_TIMEOUT is taken and not needed", "METHOD=SLEEP",
				"k8s-sidecar's REQ_BASIC_AUTH_ENCODING is taken and not needed"}},
		{name: "a user without a password sends no basic auth, as k8s-sidecar", env: with(map[string]string{"REQ_PASSWORD": ""}),
			want: []string{"--selector=grafana_dashboard=1", "--configroot=/tmp/dashboards", "--selector-kind=both", "--secret-file-mode=0644", "--listen-address=:8080", "--log-format=json",
				"--reload-http=http://localhost:3000/api/admin/provisioning/dashboards/reload", "--reload-http-method=POST", "--reload-http-on-start"},
			wantNotes: []string{"no basic auth is sent"}},
		{name: "the user from a file, the password from the environment", env: with(map[string]string{"REQ_USERNAME": "", "REQ_USERNAME_FILE": "/s/user"}),
			want: []string{"--selector=grafana_dashboard=1", "--configroot=/tmp/dashboards", "--selector-kind=both", "--secret-file-mode=0644", "--listen-address=:8080", "--log-format=json",
				"--reload-http=http://:s3cr3t@localhost:3000/api/admin/provisioning/dashboards/reload", "--reload-http-method=POST",
				"--reload-http-username-file=/s/user", "--reload-http-on-start"}},
		{name: "SCRIPT is refused", env: with(map[string]string{"SCRIPT": "/x.sh"}), wantErr: "k8s-sidecar's SCRIPT is set: the reloader runs no script"},
		{name: "ENABLE_5XX is refused", env: with(map[string]string{"ENABLE_5XX": "true"}), wantErr: "k8s-sidecar's ENABLE_5XX is set"},
		{name: "ENABLE_5XX=false is its default", env: with(map[string]string{"ENABLE_5XX": "false"})},
		{name: "skipping the app's TLS verification, over https", env: with(map[string]string{"REQ_SKIP_TLS_VERIFY": "true", "REQ_URL": "https://grafana:3000/r", "REQ_USERNAME": "", "REQ_PASSWORD": ""}),
			want: []string{"--selector=grafana_dashboard=1", "--configroot=/tmp/dashboards", "--selector-kind=both", "--secret-file-mode=0644", "--listen-address=:8080", "--log-format=json",
				"--reload-http=https://grafana:3000/r", "--reload-http-method=POST", "--reload-http-insecure-skip-verify", "--reload-http-on-start"}},
		{name: "RESOURCE_NAME is refused with what to use", env: with(map[string]string{"RESOURCE_NAME": "secret/x"}), wantErr: "--secret=NAMESPACE/NAME"},
		{name: "no FOLDER", env: map[string]string{"LABEL": "x"}, wantErr: "FOLDER is not set"},
		{name: "a bad REQ_METHOD", env: with(map[string]string{"REQ_METHOD": "DELETE"}), wantErr: `REQ_METHOD="DELETE": use GET or POST`},
		{name: "credentials without a URL (the Grafana chart with skipReload): nothing is requested, as k8s-sidecar",
			env:       with(map[string]string{"REQ_URL": "", "REQ_METHOD": ""}),
			want:      []string{"--selector=grafana_dashboard=1", "--configroot=/tmp/dashboards", "--selector-kind=both", "--secret-file-mode=0644", "--listen-address=:8080", "--log-format=json"},
			wantNotes: []string{"k8s-sidecar's REQ_PASSWORD is set without REQ_URL: nothing is requested"}},
		{name: "LIST, an init container: written once, nothing requested",
			env:       with(map[string]string{"METHOD": "LIST", "LOG_LEVEL": "WARNING"}),
			want:      []string{"--selector=grafana_dashboard=1", "--configroot=/tmp/dashboards", "--selector-kind=both", "--once", "--secret-file-mode=0644", "--listen-address=:8080", "--log-format=json", "--log-level=warn"},
			wantNotes: []string{"METHOD=LIST: the files are written once"}},
		{name: "a bad LOG_FORMAT", env: with(map[string]string{"LOG_FORMAT": "XML"}), wantErr: `LOG_FORMAT="XML"`},
		{name: "a bad REQ_TIMEOUT", env: with(map[string]string{"REQ_TIMEOUT": "soon"}), wantErr: `REQ_TIMEOUT="soon"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, notes, ok, err := k8sSidecarArgs(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.NotContains(t, err.Error(), "s3cr3t")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, !tt.notK8s, ok)
			if tt.want != nil {
				assert.Equal(t, tt.want, args)
			}
			for _, n := range tt.wantNotes {
				found := false
				for _, got := range notes {
					found = found || strings.Contains(got, n)
				}
				assert.True(t, found, "a note containing %q in %q", n, notes)
			}
			if ok {
				// Whatever the environment held, the flags it became parse and pass the
				// reloader's own checks (with FOLDER made, and no credential file to read).
				for i, a := range args {
					if strings.HasPrefix(a, "--configroot=") {
						args[i] = "--configroot=" + t.TempDir()
					}
				}
				if !strings.Contains(strings.Join(args, " "), "-file=") {
					_, err := parse(t, args...)
					require.NoError(t, err, "%v", args)
				}
			}
		})
	}
	assert.Equal(t, []string{"--reload-http=http://admin:xxxxx@h/r?token=xxxxx", "--reload-http-body=(9 bytes)"},
		redactArgs([]string{"--reload-http=http://admin:s3cr3t@h/r?token=t0k", `--reload-http-body={"k":"v"}`}))
}

// What k8s-sidecar does beyond its flags: FOLDER made, a taken health port survived, and the
// API server's certificate unchecked only for SKIP_TLS_VERIFY exactly "true", said once.
func TestK8sSidecarStart(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	_, _, ok, err := k8sSidecarStart([]string{"--configmap=a"}, env(map[string]string{"LABEL": "x", "FOLDER": "/d"}))
	require.NoError(t, err)
	assert.False(t, ok, "arguments given: not k8s-sidecar's start")

	for value, insecure := range map[string]bool{"true": true, "True": false, "1": false, "false": false, "": false} {
		args, peer, ok, err := k8sSidecarStart(nil, env(map[string]string{"LABEL": "x", "FOLDER": "/d", "SKIP_TLS_VERIFY": value}))
		require.NoError(t, err)
		require.True(t, ok)
		assert.Contains(t, args, "--configroot=/d")
		assert.True(t, peer.createRoot)
		assert.True(t, peer.healthPortOptional)
		assert.Equal(t, insecure, peer.insecureAPI, "SKIP_TLS_VERIFY=%q", value)
		warned := strings.Contains(strings.Join(peer.notes, "\n"), "SKIP_TLS_VERIFY=true: the API server's certificate is not verified")
		assert.Equal(t, insecure, warned, "SKIP_TLS_VERIFY=%q", value)
	}
}
