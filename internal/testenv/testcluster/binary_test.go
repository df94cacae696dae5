package testcluster

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLogTailKeepsRaceReports(t *testing.T) {
	var lines []string
	lines = append(lines, "==================", "WARNING: DATA RACE", "Write at 0x1", "==================")
	for i := range 100 {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	out := logTail(strings.Join(lines, "\n"), 10)
	assert.Contains(t, out, "WARNING: DATA RACE\nWrite at 0x1\n==================")
	assert.Contains(t, out, "[94 earlier lines left out]\nline 90\n")
	assert.True(t, strings.HasSuffix(out, "line 99"))
	assert.NotContains(t, out, "line 89")
	assert.Equal(t, "a\nb\n", logTail("a\nb\n", 10))
}
