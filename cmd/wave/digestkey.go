package main

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/installkey"
	"github.com/configwave/configwave/internal/waveclient"
)

// loadDigestKey returns the key of the digests in the inputs records: --hash-key-file's, else the
// install key's, else none (--install-key-secret=""). When the install key was asked for and
// cannot be had, wave fails closed: it starts nothing and writes nothing, since records
// written with unkeyed digests would let whoever reads a workload test guesses of a Secret's
// value, and would all be rewritten once the key is back. A dry run writes nothing, so it
// goes on without a Secret it may not create.
func loadDigestKey(ctx context.Context, client waveclient.Interface, cfg *config) ([]byte, error) {
	if cfg.installKeyName == "" {
		return cfg.hashKey, nil
	}
	ns, name := cfg.installKeyNS, cfg.installKeyName
	key, home, err := installkey.Load(ctx, client, ns, name, !cfg.dryRun)
	switch {
	case err == nil && home != installkey.InSecret:
		klog.InfoS("the install key lives in a "+string(home)+", not a Secret: wave may not create Secrets in its namespace (a peer's RBAC); whoever reads "+string(home)+"s there can read it", "object", ns+"/"+name)
		return key, nil
	case err == nil:
		return key, nil
	case cfg.dryRun && errors.Is(err, installkey.ErrMissing):
		klog.InfoS("dry run: the install key Secret does not exist and is not made; deciding with unkeyed digests", "secret", ns+"/"+name)
		return nil, nil
	case errors.Is(err, installkey.ErrNowhere):
		return nil, fmt.Errorf("%w; wave writes nothing without it (or set --install-key-secret=\"\" to accept unkeyed digests)", err)
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		// The API server's text names the Secret and the namespace again: said once, here.
		return nil, fmt.Errorf("install key %s/%s: wave may not read it, and writes nothing without it: grant get on Secret %s in namespace %s, or set --install-key-secret=\"\" to accept unkeyed digests", ns, name, name, ns)
	default:
		return nil, fmt.Errorf("%w; wave writes nothing without it (or set --install-key-secret=\"\" to accept unkeyed digests)", err)
	}
}
