package testcluster

import (
	"os"
	"os/exec"
	"testing"
)

// NeedProgram returns the path of a program a test runs for real (prometheus, nginx, ...).
// When it is missing the test is skipped with one line that says how to get it; under CI=true
// it fails instead, because CI installs every program the tests use (.ci/run).
func NeedProgram(t testing.TB, name, debianPackage string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	msg := name + " is not on PATH: install Debian's " + debianPackage + " package (.ci/run does) to run this test"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
