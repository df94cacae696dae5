package startup

import (
	"math"
	"runtime/debug"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
)

func TestMemoryLimitFromCgroup(t *testing.T) {
	for name, tt := range map[string]struct {
		files map[string]string
		want  int64
		ok    bool
	}{
		"cgroup v2, 50Mi":        {map[string]string{"memory.max": "52428800\n"}, 52428800, true},
		"cgroup v2, no limit":    {map[string]string{"memory.max": "max\n"}, 0, false},
		"cgroup v1, 50Mi":        {map[string]string{"memory/memory.limit_in_bytes": "52428800\n"}, 52428800, true},
		"cgroup v1, no limit":    {map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0, false},
		"no cgroup files at all": {nil, 0, false},
		"garbage":                {map[string]string{"memory.max": "lots"}, 0, false},
	} {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for f, c := range tt.files {
				fsys[f] = &fstest.MapFile{Data: []byte(c)}
			}
			got, ok := MemoryLimitFromCgroup(fsys)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestApplyMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	limited := fstest.MapFS{"memory.max": &fstest.MapFile{Data: []byte("52428800")}}
	noEnv := func(string) (string, bool) { return "", false }
	assert.EqualValues(t, 47185920, ApplyMemoryLimit(DefaultMemoryLimitRatio, noEnv, limited), "90% of 50Mi")
	assert.EqualValues(t, 47185920, debug.SetMemoryLimit(-1))
	assert.Zero(t, ApplyMemoryLimit(DefaultMemoryLimitRatio, func(k string) (string, bool) { return "100MiB", k == "GOMEMLIMIT" }, limited), "GOMEMLIMIT wins")
	assert.Zero(t, ApplyMemoryLimit(DefaultMemoryLimitRatio, noEnv, fstest.MapFS{}), "no container limit: left as it is")
}
