package podrefs

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Each dialect reads booleans as its own tool does: Wave and Reloader's search, match and
// ignore want exactly "true"; Reloader's autos take strconv.ParseBool's spellings as written;
// configwave's own annotations take them with blanks around.
func TestBooleansPerDialect(t *testing.T) {
	for _, tt := range []struct {
		v                                string
		wave, stakaterExact, autos, ours bool
	}{
		{"true", true, true, true, true},
		{"True", false, false, true, true},
		{"1", false, false, true, true},
		{"t", false, false, true, true},
		{" true ", false, false, false, true},
		{"yes", false, false, false, false},
		{"false", false, false, false, false},
		{"", false, false, false, false},
	} {
		t.Run(tt.v, func(t *testing.T) {
			assert.Equal(t, tt.wave, WaveTrue(tt.v), "Wave")
			assert.Equal(t, tt.stakaterExact, stakaterTrue(tt.v), "Reloader's search, match, ignore")
			assert.Equal(t, tt.autos, stakaterParseBool(tt.v), "Reloader's autos")
			assert.Equal(t, tt.ours, isTrue(tt.v), "configwave.io/*")
		})
	}
}
