package notify

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeProc writes a /proc with the given processes: pid → {comm, ppid, argv0}.
func fakeProc(t *testing.T, procs map[int][3]string) string {
	dir := t.TempDir()
	for pid, p := range procs {
		d := filepath.Join(dir, strconv.Itoa(pid))
		require.NoError(t, os.Mkdir(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, "stat"), []byte(strconv.Itoa(pid)+" ("+p[0]+") S "+p[1]+" 1 1 0 -1"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(d, "cmdline"), []byte(p[2]+"\x00-g\x00"), 0o644))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "self"), 0o755))
	return dir
}

func TestNamedProcessFind(t *testing.T) {
	tests := []struct {
		name    string
		procs   map[int][3]string
		find    string
		want    int
		wantErr string
	}{
		{"one process", map[int][3]string{1: {"pause", "0", "/pause"}, 20: {"prometheus", "0", "/bin/prometheus"}}, "prometheus", 20, ""},
		{"a master and its workers: the master", map[int][3]string{7: {"nginx", "0", "nginx"}, 8: {"nginx", "7", "nginx"}, 9: {"nginx", "7", "nginx"}}, "nginx", 7, ""},
		{"a name longer than comm holds, by argv[0]", map[int][3]string{5: {"my-long-applica", "0", "/usr/bin/my-long-application"}}, "my-long-application", 5, ""},
		{"a comm with spaces and parentheses", map[int][3]string{5: {"a (b) c", "0", "x"}}, "a (b) c", 5, ""},
		{"none", map[int][3]string{1: {"pause", "0", "/pause"}}, "nginx", 0, "shareProcessNamespace: true"},
		{"two unrelated: refused", map[int][3]string{3: {"app", "1", "app"}, 4: {"app", "1", "app"}}, "app", 0, "2 processes of that name (pids 3, 4)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pid, err := (&NamedProcess{Name: tt.find, Proc: fakeProc(t, tt.procs)}).Find()
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.Contains(t, err.Error(), "--reload-process="+tt.find)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, pid)
		})
	}
}

// On the real /proc: the caller is never a match, so a reloader named like its app cannot
// signal itself.
func TestNamedProcessNeverSignalsItself(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	n := &NamedProcess{Name: filepath.Base(self), Sig: syscall.SIGUSR1}
	err = n.Notify(context.Background())
	require.Error(t, err, "the only process of that name is the caller itself")
	assert.Contains(t, err.Error(), "no process of that name")
}
