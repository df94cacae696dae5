package testcluster

import (
	"embed"
	"os"
	"path/filepath"
	"testing"
)

// The CustomResourceDefinitions of the two controllers whose objects say whether the Secret
// they write is done, copied unchanged from their modules (crds/README.md names the versions):
// neither controller is built here (see the README), so a test writes their status as they
// write it.
//
//go:embed crds/*.yaml
var secretWriterCRDs embed.FS

// InstallSecretWriterCRDs serves cert-manager's Certificates and External Secrets'
// ExternalSecrets until the test ends (InstallCRDs).
func InstallSecretWriterCRDs(t testing.TB, c *Cluster) {
	t.Helper()
	entries, err := secretWriterCRDs.ReadDir("crds")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var files []string
	for _, e := range entries {
		b, err := secretWriterCRDs.ReadFile("crds/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, e.Name())
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	InstallCRDs(t, c, files)
}
