package logflags

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
	Add(fs, "verbosity.")
	require.NoError(t, fs.Parse([]string{"--v=10", "--vmodule=*=10"}))
	Cap(fs)
	assert.Equal(t, "5", fs.Lookup("v").Value.String())
	assert.Equal(t, "*=5", fs.Lookup("vmodule").Value.String())
	require.NoError(t, fs.Parse([]string{"--v=0", "--vmodule="}))
	Cap(fs)
}
