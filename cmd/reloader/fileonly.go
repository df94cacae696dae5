//go:build configwave_fileonly

package main

// The file-only build: the reloader without the API client, for the launches that read
// mounted folders (configmap-reload's and prometheus-config-reloader's). It is the same
// program with the API source left out, so that its idle memory is that of the folder watch
// alone; a launch that needs the API stops at the flag check (checkBuild) and names the full
// build.

import (
	"errors"

	"github.com/configwave/configwave/internal/reloader/reload"
)

// fileOnly is true: this build reads mounted folders only.
const fileOnly = true

// handOverToFileOnlyBuild has nothing to do: this is the file-only build.
func handOverToFileOnlyBuild(*config, string, []string) {}

// readAPI is never reached: checkBuild stops an API launch first.
func readAPI(*config, *reload.Reloader, *reload.Metrics) (runningSource, eventRecorder, error) {
	return nil, nil, errors.New("this file-only build reads no API: " + fullBuildPath + " does")
}
