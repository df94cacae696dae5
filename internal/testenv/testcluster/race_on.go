//go:build race

package testcluster

// raceEnabled: the test binary runs with -race, so the binaries it builds do too.
const raceEnabled = true
