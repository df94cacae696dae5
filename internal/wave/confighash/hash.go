// Package confighash computes what wave writes about config: Wave's hash of the data a
// template uses (two formulas, pinned by golden tests, so no upgrade re-rolls a cluster), the
// per-key digests the informers keep instead of values, and the inputs record that tells
// whether a workload's pods run the current config.
//
//	hash, err := confighash.WaveHash(confighash.HashWave, used.Wave, getFullObject)
//	in := confighash.InputsOf(namespace, used.Visible, digestsFromTheCache)
package confighash

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/podrefs"
)

// HashFormat selects the formula of the config-hash annotation.
type HashFormat string

// The formulas of wave-k8s/wave's pkg/core/hash.go, by release line (golden vectors from
// Wave's own code at each tag: TestWaveHashGoldenPerRelease).
const (
	// HashWave is Wave 0.9 and later, to the current release: ConfigMap data and binaryData
	// merged, values as bytes (base64 in the JSON); every object's entry a map of its own, so
	// an empty Secret is {}.
	HashWave HashFormat = "wave"
	// HashWaveV07 is Wave 0.7 and 0.8: as HashWave, but a Secret's own data map went into the
	// JSON, so an empty Secret is null.
	HashWaveV07 HashFormat = "wave-v07"
	// HashWaveV05 is Wave up to 0.6: ConfigMap data only, values as JSON strings; an object's
	// own map, so an empty one is null.
	HashWaveV05 HashFormat = "wave-v05"
)

// AdoptableFormats are every release line's formula: a workload first seen with a hash that
// one of them gives for the current config runs that config, and nothing rolls.
var AdoptableFormats = []HashFormat{HashWave, HashWaveV07, HashWaveV05}

// ParseHashFormat checks a --hash-format value.
func ParseHashFormat(s string) (HashFormat, error) {
	if f := HashFormat(s); slices.Contains(AdoptableFormats, f) {
		return f, nil
	}
	return "", fmt.Errorf("--hash-format=%q: use %q (Wave 0.9 and later), %q (Wave 0.7 and 0.8) or %q (Wave 0.6 and earlier)", s, HashWave, HashWaveV07, HashWaveV05)
}

// GetFunc returns the full ConfigMap or Secret, or nil when it does not exist.
type GetFunc func(configref.Ref) (any, error)

// WaveHash computes Wave's config hash over the objects uses names: the lowercase hex SHA256
// of the JSON {"configMaps": {NAME: {KEY: VALUE}}, "secrets": {NAME: {KEY: VALUE}}}, objects
// keyed by name alone, a missing optional object left out, a missing optional key left out.
// A missing required object or key is a *MissingError: Wave then leaves the hash as it is.
//
// This value is what existing Wave installations wrote; changing a byte of it would roll every
// opted-in workload of every cluster that switches. The golden tests pin it.
func WaveHash(format HashFormat, uses podrefs.Uses, get GetFunc) (string, error) {
	return KeyedWaveHash(format, nil, uses, get)
}

// KeyedWaveHash is WaveHash with HMAC-SHA256 under key in place of SHA256 when key is not
// empty (--hash-key-file). Anyone who can read a Deployment can read its hash; without a key, a
// short or guessable Secret value could be found by trying candidates. The price: the value is
// no longer Wave's, so switching from Wave with a key rolls each workload once.
func KeyedWaveHash(format HashFormat, key []byte, uses podrefs.Uses, get GetFunc) (string, error) {
	src := struct {
		ConfigMaps map[string]any `json:"configMaps"`
		Secrets    map[string]any `json:"secrets"`
	}{ConfigMaps: map[string]any{}, Secrets: map[string]any{}}

	for _, ref := range uses.Refs() {
		u := uses[ref]
		obj, err := get(ref)
		if err != nil {
			return "", err
		}
		if obj == nil {
			if u.Required {
				return "", &podrefs.MissingError{Ref: ref, Where: u.Where}
			}
			continue
		}
		var all map[string]any // every key's value, typed as the format wants it
		var allNil bool        // Wave put the object's own (nil) map in the JSON: null
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			all, allNil = configMapValues(format, o)
		case *corev1.Secret:
			all = map[string]any{}
			for k, v := range o.Data {
				all[k] = v
			}
			allNil = o.Data == nil && format != HashWave
		default:
			return "", fmt.Errorf("%s: unexpected type %T", ref, obj)
		}
		var entry any
		if u.AllKeys {
			entry = all
			if allNil {
				entry = nil
			}
		} else {
			picked := map[string]any{}
			for k, required := range u.Keys {
				v, ok := all[k]
				if !ok {
					if required {
						return "", &podrefs.MissingError{Ref: ref, Key: k, Where: u.Where}
					}
					continue
				}
				picked[k] = v
			}
			entry = picked
		}
		if ref.Kind == configref.ConfigMap {
			src.ConfigMaps[ref.Name] = entry
		} else {
			src.Secrets[ref.Name] = entry
		}
	}
	b, err := json.Marshal(src)
	if err != nil {
		return "", fmt.Errorf("encode the config hash input: %w", err)
	}
	if len(key) > 0 {
		mac := hmac.New(sha256.New, key)
		mac.Write(b)
		return hex.EncodeToString(mac.Sum(nil)), nil
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// configMapValues: Wave 0.7 and later merge data and binaryData as bytes into a new map; Wave 0.5
// used the data map itself, strings, so a ConfigMap without data was null.
func configMapValues(format HashFormat, cm *corev1.ConfigMap) (map[string]any, bool) {
	all := map[string]any{}
	if format == HashWaveV05 {
		for k, v := range cm.Data {
			all[k] = v
		}
		return all, cm.Data == nil
	}
	for k, v := range cm.Data {
		all[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		all[k] = v
	}
	return all, false
}
