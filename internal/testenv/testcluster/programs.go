package testcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
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

// Helm returns Helm's own CLI: $HELM where set, else the one the programs module builds
// (EnsurePrograms), which every machine with the module proxy can build.
func Helm(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("HELM"); bin != "" {
		return bin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	p, err := EnsurePrograms(ctx, testWriter{t}, "helm")
	if err != nil {
		t.Fatalf("Helm's CLI: %v (or set $HELM to one)", err)
	}
	return p.Path("helm")
}
