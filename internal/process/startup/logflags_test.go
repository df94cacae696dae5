package startup

import (
	"testing"

	flag "github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCapVModule(t *testing.T) {
	tests := []struct {
		in, want string
		changed  bool
	}{
		{"", "", false},
		{"reload=4", "reload=4", false},
		{"*=10", "*=5", true},
		{"reload=2,request=8,round_trippers=9", "reload=2,request=5,round_trippers=5", true},
		{"x=5", "x=5", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, changed := CapVModule(tt.in)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.changed, changed)
		})
	}
}

// The whole path a command line takes: parse, then Cap, leaves klog at most at MaxVerbosity.
func TestCapLowersVAndVModule(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	AddLogFlags(fs, "verbosity.")
	require.NoError(t, fs.Parse([]string{"--v=10", "--vmodule=*=10"}))
	CapLogVerbosity(fs)
	assert.Equal(t, "5", fs.Lookup("v").Value.String())
	assert.Equal(t, "*=5", fs.Lookup("vmodule").Value.String())
	require.NoError(t, fs.Parse([]string{"--v=0", "--vmodule="}))
	CapLogVerbosity(fs)
}

func TestLogFormatAndLevel(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantErr  string
		wantV    string
		wantJSON bool
	}{
		{name: "defaults", args: nil, wantV: "0"},
		{name: "prometheus-config-reloader's debug", args: []string{"--log-level=debug", "--log-format=logfmt"}, wantV: "4"},
		{name: "Stakater Reloader's chart: info, and json", args: []string{"--log-level=info", "--log-format=json"}, wantV: "0", wantJSON: true},
		{name: "trace is the highest verbosity that takes effect", args: []string{"--log-level=trace"}, wantV: "5"},
		{name: "--v wins over --log-level", args: []string{"--log-level=debug", "--v=2"}, wantV: "2"},
		{name: "Reloader's empty format is text", args: []string{"--log-format="}, wantV: "0"},
		{name: "warning logs as info", args: []string{"--log-level=WARNING"}, wantV: "0"},
		{name: "a bad level", args: []string{"--log-level=loud"}, wantErr: `invalid argument "loud" for "--log-level" flag: use trace, debug, info, warn or error`},
		{name: "a bad format", args: []string{"--log-format=xml"}, wantErr: `invalid argument "xml" for "--log-format" flag: use text or json`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			AddLogFlags(fs, "")
			err := fs.Parse(tt.args)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			// Apply's verbosity half only: the JSON half replaces klog's global logger, which
			// the end-to-end tests check in the binaries.
			format := fs.Lookup("log-format").Value.String()
			require.NoError(t, fs.Lookup("log-format").Value.Set("text"))
			ApplyLogFormat(fs)
			assert.Equal(t, tt.wantV, fs.Lookup("v").Value.String())
			assert.Equal(t, tt.wantJSON, format == "json")
			require.NoError(t, fs.Lookup("v").Value.Set("0")) // klog's verbosity is global
		})
	}
}
