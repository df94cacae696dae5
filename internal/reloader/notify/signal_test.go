package notify

import (
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in      string
		want    syscall.Signal
		wantErr string
	}{
		{in: "HUP", want: syscall.SIGHUP},
		{in: "SIGHUP", want: syscall.SIGHUP},
		{in: "usr1", want: syscall.SIGUSR1},
		{in: "sigterm", want: syscall.SIGTERM},
		{in: "10", want: syscall.Signal(10)},
		{in: "0", wantErr: "out of range"},
		{in: "BOGUS", wantErr: `signal "BOGUS" is not known`},
		{in: "", wantErr: "is not known"},
		{in: "KILL", wantErr: `signal "KILL" cannot be caught by the app`},
		{in: "9", wantErr: "cannot be caught"},
		{in: "sigstop", wantErr: "cannot be caught"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSignal(tt.in)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func FuzzParseSignal(f *testing.F) {
	for _, s := range []string{"HUP", "SIGUSR1", "usr2", "15", "64", "65", "KILL", " hup ", "SIG", "-1", "0x1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sig, err := ParseSignal(s)
		if err != nil {
			assert.Contains(t, err.Error(), strconv.Quote(s), "the error names the value")
			return
		}
		assert.True(t, sig >= 1 && sig <= 64, "signal %d out of range", sig)
		assert.NotContains(t, []syscall.Signal{syscall.SIGKILL, syscall.SIGSTOP}, sig)
		if name := unix.SignalName(sig); name != "" {
			again, err := ParseSignal(name)
			require.NoError(t, err)
			assert.Equal(t, sig, again, "the name parses back to the same signal")
		}
	})
}
