//go:build !configwave_fileonly

package main

// The flags of the API source, checked in the full build only: their parsers (label
// selectors, Kubernetes names) are not linked into the file-only build, which refuses these
// flags first (checkBuild).

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/reloader/apisource"
	"github.com/configwave/configwave/internal/reloader/onefirst"
	"github.com/configwave/configwave/internal/reloader/source"
)

// checkAPISources checks what is read from the API: named objects, the selector, and the
// annotation that places an object's files. A launch that reads folders reads no API.
func (o *options) checkAPISources(c *config) error {
	if len(c.folders) > 0 {
		return nil
	}
	if err := o.checkRollout(c); err != nil {
		return err
	}
	namespaces, err := o.namespaceList()
	if err != nil {
		return err
	}
	ns := namespaces[0]
	for _, s := range slices.Concat(o.configMaps, o.secrets) {
		if len(namespaces) > 1 && !strings.Contains(s, "/") {
			return fmt.Errorf("%q has no namespace, and --namespace lists several: write it as NAMESPACE/%s", s, s)
		}
	}
	for _, named := range []struct {
		kind  configref.Kind
		names []string
	}{{configref.ConfigMap, o.configMaps}, {configref.Secret, o.secrets}} {
		for _, s := range named.names {
			r, err := apisource.ParseRef(named.kind, s, ns)
			if err != nil {
				return err
			}
			c.refs = append(c.refs, r)
		}
	}
	if o.selector != "" {
		sel, err := labels.Parse(o.selector)
		if err != nil {
			return fmt.Errorf("--selector=%q: %w", o.selector, err)
		}
		if sel.Empty() {
			return fmt.Errorf("--selector=%q selects everything; name a label, e.g. grafana_dashboard=1", o.selector)
		}
		kinds, err := parseSelectorKind(o.selectorKind)
		if err != nil {
			return err
		}
		c.selector = &source.Selector{Kinds: kinds, Namespaces: namespaces, Labels: sel.String()}
		if o.allNamespaces {
			c.selector.Namespaces = nil
		}
	} else if o.allNamespaces {
		return fmt.Errorf("--all-namespaces applies to --selector only; add --selector or drop it")
	}
	if a := strings.TrimSpace(o.folderAnnotation); a != "" {
		if errs := validation.IsQualifiedName(a); len(errs) > 0 {
			return fmt.Errorf("--folder-annotation=%q is not an annotation name (%s); give one such as k8s-sidecar-target-directory, or empty for none", o.folderAnnotation, strings.Join(errs, "; "))
		}
		c.layout.FolderAnnotation, c.layout.Root = a, filepath.Clean(o.configRoot)
	}
	return nil
}

// namespaceList is --namespace, deduplicated, else the pod's own namespace.
func (o *options) namespaceList() ([]string, error) {
	var namespaces []string
	for _, n := range o.namespaces {
		if n = strings.TrimSpace(n); n == "" || slices.Contains(namespaces, n) {
			continue
		} else if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			return nil, fmt.Errorf("--namespace: %q is not a namespace name (%s)", n, strings.Join(errs, "; "))
		}
		namespaces = append(namespaces, n)
	}
	if len(namespaces) == 0 {
		namespaces = []string{configref.DefaultNamespace()}
	}
	return namespaces, nil
}

func parseSelectorKind(s string) ([]configref.Kind, error) {
	switch strings.ToLower(s) {
	case "configmap", "configmaps":
		return []configref.Kind{configref.ConfigMap}, nil
	case "secret", "secrets":
		return []configref.Kind{configref.Secret}, nil
	case "both":
		return []configref.Kind{configref.ConfigMap, configref.Secret}, nil
	}
	return nil, fmt.Errorf("--selector-kind=%q: use configmap, secret or both", s)
}

// redactedFlagURL is a URL flag's value as an error may quote it: without its user and password.
func redactedFlagURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}

// checkRollout checks --rollout, --rollout-soak, --rollout-max-unavailable and --health-url
// for a launch that reads the API.
func (o *options) checkRollout(c *config) error {
	switch o.rollout {
	case rolloutAllAtOnce:
		for _, f := range []string{"rollout-soak", "rollout-max-unavailable", "health-url", "health-url-timeout", "health-url-failure-threshold"} {
			if o.changed(f) {
				return fmt.Errorf("--%s applies to --rollout=one-first: add it, or drop --%s", f, f)
			}
		}
		return nil
	case rolloutOneFirst:
	default:
		return fmt.Errorf("--rollout=%q: use all-at-once or one-first", o.rollout)
	}
	if o.rolloutSoak < time.Second {
		return fmt.Errorf("--rollout-soak=%s: give at least 1s, long enough for the app's readiness probe to see a bad config (its periodSeconds × failureThreshold)", o.rolloutSoak)
	}
	if _, err := onefirst.MaxUnavailable(o.rolloutMaxBusy, 100); err != nil {
		return err
	}
	if o.healthURL != "" {
		u, err := url.Parse(o.healthURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--health-url=%q: give the app's health URL, such as http://127.0.0.1:8080/healthz", redactedFlagURL(o.healthURL))
		}
	}
	for _, f := range []string{"health-url-timeout", "health-url-failure-threshold"} {
		if o.changed(f) && o.healthURL == "" {
			return fmt.Errorf("--%s applies to --health-url: add it, or drop --%s", f, f)
		}
	}
	if o.healthTimeout <= 0 || o.healthTimeout > o.rolloutSoak {
		return fmt.Errorf("--health-url-timeout=%s: give more than 0 and at most --rollout-soak (%s)", o.healthTimeout, o.rolloutSoak)
	}
	if o.healthFailures < 1 {
		return fmt.Errorf("--health-url-failure-threshold=%d: give 1 or more", o.healthFailures)
	}
	if o.healthURL != "" {
		// One request a second, each up to the timeout: the threshold must be reachable within a soak.
		if needs := time.Duration(o.healthFailures) * (o.healthTimeout + time.Second); needs > o.rolloutSoak {
			return fmt.Errorf("--health-url-failure-threshold=%d with --health-url-timeout=%s needs up to %s of failures, longer than --rollout-soak=%s: a URL that always fails would pass; give a lower threshold or a longer soak",
				o.healthFailures, o.healthTimeout, needs, o.rolloutSoak)
		}
	}
	if o.once {
		return fmt.Errorf("--rollout=one-first watches the app after each change, and --once stops after the first: drop one of them")
	}
	c.rollout = rolloutConfig{oneFirst: true, soak: o.rolloutSoak, maxBusy: o.rolloutMaxBusy, healthURL: o.healthURL,
		healthTimeout: o.healthTimeout, healthFailures: o.healthFailures}
	return nil
}
