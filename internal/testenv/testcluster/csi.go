package testcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// The Secrets Store CSI driver's CustomResourceDefinitions, read from its Go module. The driver
// itself mounts volumes through a kubelet, which these tests do not run: a test writes its
// SecretProviderClassPodStatuses as the driver does.
const (
	secretsStoreModule  = "sigs.k8s.io/secrets-store-csi-driver"
	SecretsStoreVersion = "v1.5.3"
)

// SecretsStoreCRDs downloads the driver's module (once, into the module cache) and returns its
// CRD files.
func SecretsStoreCRDs(ctx context.Context) ([]string, error) {
	dir, err := downloadModule(ctx, secretsStoreModule, SecretsStoreVersion)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "config", "crd", "bases", "secrets-store.csi.x-k8s.io_*.yaml"))
	if err != nil || len(files) != 2 {
		return nil, fmt.Errorf("want the 2 CRDs of %s@%s under config/crd/bases, found %d (%v)", secretsStoreModule, SecretsStoreVersion, len(files), err)
	}
	return files, nil
}

// InstallSecretsStoreCRDs installs SecretProviderClass and SecretProviderClassPodStatus for
// the test; they are deleted when it ends.
func InstallSecretsStoreCRDs(t testing.TB, c *Cluster) {
	t.Helper()
	installModuleCRDs(t, c, "Secrets Store CSI driver", SecretsStoreCRDs)
}

// installModuleCRDs installs the CRDs that files finds in a Go module (downloading it once)
// for the test; they are deleted when it ends.
func installModuleCRDs(t testing.TB, c *Cluster, project string, files func(context.Context) ([]string, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	found, err := files(ctx)
	if err != nil {
		t.Fatalf("%s CRDs: %v", project, err)
	}
	InstallCRDs(t, c, found)
}
