package podrefs

import (
	"strconv"
	"strings"
)

// How each dialect reads its boolean annotations, as the tool that defined it reads them: one
// place per dialect, so that no annotation of a dialect is read another way by mistake.

// WaveTrue is how Wave reads wave.pusher.com/update-on-config-change: exactly "true".
func WaveTrue(v string) bool { return v == "true" }

// stakaterTrue is how Stakater Reloader reads search, match and ignore: exactly "true".
func stakaterTrue(v string) bool { return v == "true" }

// stakaterParseBool is how Reloader reads auto and the typed autos: Go's strconv.ParseBool, as
// written ("true", "True", "1", "t"; " true " is not).
func stakaterParseBool(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// isTrue is how configwave reads its own boolean annotations (configwave.io/*): any of Go's
// spellings, blanks around it allowed.
func isTrue(v string) bool {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	return err == nil && b
}
