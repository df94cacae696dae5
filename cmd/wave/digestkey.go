package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/installkey"
	"github.com/configwave/configwave/internal/wave/waveclient"
)

// modeHashKeyFile: --hash-key-file's key keys the records (and every template hash).
const modeHashKeyFile installkey.Mode = "hash-key-file"

// digests is how wave makes the digests of its inputs records: under a key, or without one.
type digests struct {
	key  []byte
	mode installkey.Mode
}

// digester is the informers' transform for these digests. In Stakater Reloader's --webhook-url
// mode no record is ever written, so without a key the digests stay in memory and may be of
// the values: a metadata-only write of a Secret then tells the webhook nothing, as in Reloader.
func (d digests) digester(cfg *config) confighash.Digester {
	return confighash.Digester{Key: d.key, SecretsByMetadata: d.mode == installkey.ModeSecretsByMetadata && cfg.changeWebhook == nil,
		KeepLabels:      cfg.stakaterOpts.ResourceSelector != nil,
		KeepAnnotations: []string{cfg.stakaterOpts.Dialect.Names.Match, cfg.stakaterOpts.Dialect.Names.Ignore}}
}

// loadDigestKey returns how wave makes the digests of its inputs records: under --hash-key-file's
// key; else under the install key, read from its Secret or made there; else, where the Secret is
// absent and wave may not create it (a peer's RBAC), without a key, each Secret digested by its
// metadata, never its value; plain digests only with --install-key-secret="" (or a dry run,
// which writes none). When the install key's Secret exists and cannot be used, wave fails
// closed: it starts nothing and writes nothing, since records written under another key or
// none would all be rewritten once it is fixed. It says in one line which mode and why.
func loadDigestKey(ctx context.Context, client waveclient.Interface, cfg *config) (digests, error) {
	if cfg.installKeyName == "" {
		if len(cfg.hashKey) > 0 {
			klog.InfoS("inputs records keyed with --hash-key-file's key, as the template hash is", "records", modeHashKeyFile)
			return digests{key: cfg.hashKey, mode: modeHashKeyFile}, nil
		}
		klog.InfoS(`--install-key-secret="": the inputs records hold plain digests of each key's value; whoever can read the workloads can test guesses of Secret values against them`,
			"records", installkey.ModeUnkeyed)
		return digests{mode: installkey.ModeUnkeyed}, nil
	}
	ns, name := cfg.installKeyNS, cfg.installKeyName
	res, err := installkey.Load(ctx, client, installkey.Options{Namespace: ns, Name: name, DryRun: cfg.dryRun})
	switch {
	case errors.Is(err, installkey.ErrUnreadable):
		return digests{}, fmt.Errorf("install key %s/%s: wave may not read it, and writes nothing without it: grant get on Secret %s in namespace %s, or set --install-key-secret=\"\" to accept unkeyed digests", ns, name, name, ns)
	case err != nil:
		return digests{}, fmt.Errorf("%w; wave writes nothing without it (or set --install-key-secret=\"\" to accept unkeyed digests)", err)
	}
	switch res.Mode {
	case installkey.ModeKeyed:
		klog.InfoS("inputs records keyed under the install key", "records", res.Mode, "why", res.Why)
	case installkey.ModeSecretsByMetadata:
		klog.InfoS("no install key: "+res.Why+"; records of Secrets carry their uid and resourceVersion, not digests of their values, so any write to a Secret rolls the workloads that use it; to key them, create the Secret: "+installkey.CreateCommand(ns, name),
			"records", res.Mode)
	default:
		klog.InfoS(res.Why+"; deciding with plain digests, nothing is written", "records", res.Mode)
	}
	return digests{key: res.Key, mode: res.Mode}, nil
}

// registerRecordsMode exports the mode as configwave_wave_records_info{mode}, for a dashboard
// or an alert on an install that runs without its key.
func registerRecordsMode(reg prometheus.Registerer, mode installkey.Mode) {
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: "configwave_wave_records_info",
		Help:        `Always 1; mode says how the digests of the configwave.io/config-inputs records are made: "keyed" (under the install key), "secrets-by-metadata" (no key: Secrets by their uid and resourceVersion), "unkeyed" (--install-key-secret="", or a dry run without the key), "hash-key-file".`,
		ConstLabels: prometheus.Labels{"mode": string(mode)}})
	info.Set(1)
	reg.MustRegister(info)
}
