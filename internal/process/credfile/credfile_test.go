package credfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	const secret = "s3cr3t-value"
	for _, tt := range []struct {
		name, path string
		max        int64
		line       bool
		want       string
		wantErr    string
	}{
		{name: "trimmed", path: file("key", "  "+secret+"\n"), max: 64, want: secret},
		{name: "missing: where to mount it", path: filepath.Join(dir, "nope"), max: 64, wantErr: "read the key from " + filepath.Join(dir, "nope") + ": no such file or directory (is the Secret mounted there?)"},
		{name: "too large: read no further, show nothing", path: file("big", secret+secret), max: 16, wantErr: "is larger than 16 bytes; is it the key?"},
		{name: "a folder", path: dir, max: 64, wantErr: "read the key from " + dir},
		{name: "one line", path: file("user", secret+"\n"), max: 64, line: true, want: secret},
		{name: "empty line", path: file("empty", "\n"), max: 64, line: true, wantErr: "is empty; it must hold the key"},
		{name: "two lines", path: file("two", secret+"\n"+secret), max: 64, line: true, wantErr: "holds more than one line; the key must be one line"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got string
			var err error
			if tt.line {
				got, err = Line(tt.path, tt.max, "the key")
			} else {
				var b []byte
				b, err = Read(tt.path, tt.max, "the key")
				got = string(b)
			}
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.NotContains(t, err.Error(), secret)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
