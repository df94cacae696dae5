package reload

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/reloader/supervise"
)

func TestCommandCheck(t *testing.T) {
	reaper, err := supervise.NewReaper(false)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { reaper.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "app.yaml"), []byte("good"), 0o644))
	tests := []struct {
		name, shell string
		show        bool
		timeout     time.Duration
		wantErr     []string
		notInErr    string
	}{
		{name: "accepts: runs in the new folder", shell: `test "$(cat app.yaml)" = good`},
		{name: "accepts: CONFIG_DIR is the new folder", shell: `test "$(cat "$CONFIG_DIR/app.yaml")" = good`},
		{name: "rejects with output for ConfigMaps", shell: `echo "line 3: bad value"; exit 4`, show: true,
			wantErr: []string{"validation command rejected", "exit code 4", "line 3: bad value"}},
		{name: "rejects without output when a Secret is a source", shell: `cat app.yaml; exit 1`,
			wantErr: []string{"output withheld"}, notInErr: "good"},
		{name: "times out", shell: `sleep 30`, timeout: 100 * time.Millisecond, wantErr: []string{"did not finish within 100ms"}},
		{name: "rejects at once when a background process holds its output open", shell: `(sleep 5 &); echo "bad key"; exit 3`, show: true,
			timeout: 3 * time.Second, wantErr: []string{"exit code 3", "bad key"}},
		{name: "keeps the tail of a long output", shell: `i=0; while [ $i -lt 500 ]; do echo "line $i"; i=$((i+1)); done; exit 1`, show: true,
			wantErr: []string{"line 499"}, notInErr: "line 1 "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Command{Shell: tt.shell, Reaper: reaper, ShowOutput: tt.show, Timeout: tt.timeout}
			err := c.Check(context.Background(), dir)
			if len(tt.wantErr) == 0 {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrRejected)
			for _, s := range tt.wantErr {
				assert.Contains(t, err.Error(), s)
			}
			if tt.notInErr != "" {
				assert.NotContains(t, err.Error(), tt.notInErr)
			}
		})
	}
}
