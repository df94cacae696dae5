package testcluster

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// NeedProgram returns the path of a program a test runs for real (prometheus, nginx, ...).
// When it is missing the test is skipped with one line that says how to get it; under CI=true
// it fails instead, because CI installs every program the tests use (.ci/run).
func NeedProgram(t testing.TB, name, debianPackage string) string {
	t.Helper()
	path, err := LookProgram(name, debianPackage)
	if err == nil {
		return path
	}
	msg := err.Error() + " to run this test"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// LookProgram returns the path of a program, or an error that says which package has it.
func LookProgram(name, debianPackage string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s is not on PATH: install Debian's %s package (.ci/run does)", name, debianPackage)
	}
	return path, nil
}
