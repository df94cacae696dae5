package main

import (
	"fmt"
	"github.com/configwave/configwave/internal/wave/brake"
	"github.com/configwave/configwave/internal/wave/window"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/alert"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/leader"
	"github.com/configwave/configwave/internal/wave/rollout"
)

type config struct {
	options
	window           window.Windows // --rollout-window
	flappingRule     brake.Rule     // --flapping-threshold
	countByNamespace bool           // METRICS_COUNT_BY_NAMESPACE=enabled
	namespaceList    []string
	selector         labels.Selector
	dialects         rollout.Dialects
	stakaterOpts     rollout.StakaterOptions
	format           confighash.HashFormat
	hashKey          []byte
	webhook          *alert.Webhook
	reloadAlerts     *alert.Webhook    // Stakater Reloader's ALERT_ON_RELOAD; nil when off
	changeWebhook    *alert.Webhook    // Stakater Reloader's --webhook-url mode; nil when off
	reloadAlertEnv   alert.StakaterEnv // its message
	installKeyNS     string            // the install key Secret; "" name: none
	installKeyName   string
	// --revisions-webhook-cert-secret as namespace and name; "" name: the cert dir is read
	webhookCertNS, webhookCertName string
	csi                            bool // --enable-csi-integration
}

// translate turns what the peers' flags and environment ask into wave's own options: Stakater
// Reloader's --enable-ha and its chart's environment, Wave's --metrics-addr. It returns a new
// options; o is not changed.
func (o options) translate(env stakaterEnv) (options, error) {
	t := o
	ha, err := o.stakater.highAvailability()
	if err != nil {
		return options{}, err
	}
	if ha {
		t.leaderElection = true
		if !o.changed("leader-election-id") {
			t.leaderID = stakaterLease
		}
	}
	if env.namespace != "" && !o.changed("namespaces") {
		t.namespaces = env.namespace
	}
	byChart := env.chart || o.changed != nil && o.changed("log-level") // Reloader's chart before 2.2 sets no env of its own
	if !byChart || o.stakaterListen == o.listenAddress {
		t.stakaterListen = ""
	}
	if o.metricsAddr != "" {
		if o.listenAddress != defaultListenAddress && o.listenAddress != o.metricsAddr {
			return options{}, fmt.Errorf("--metrics-addr=%q and --listen-address=%q: give only --listen-address (--metrics-addr is Wave's name for it)", o.metricsAddr, o.listenAddress)
		}
		t.listenAddress = o.metricsAddr
	}
	return t, nil
}

// check turns the command line and the environment into a config, step by step; every error
// names the flag and what to do.
func (o *options) check() (*config, error) {
	getenv := o.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	env := readStakaterEnv(getenv)
	t, err := o.translate(env)
	if err != nil {
		return nil, err
	}
	c := &config{options: t, selector: labels.Everything(), countByNamespace: env.countByNamespace}
	c.reloadAlertEnv = alert.ReadStakaterEnv(getenv)
	for _, step := range []func(*config) error{checkScope, checkDialects, checkHash, checkPacing, checkWebhooks, checkRevisionsWebhook, checkLeaderElection} {
		if err := step(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// checkScope: which namespaces and workloads wave manages.
func checkScope(c *config) error {
	var err error
	if c.namespaceList, err = parseNamespaces(c.namespaces); err != nil {
		return err
	}
	if c.labelSelector != "" {
		sel, err := labels.Parse(c.labelSelector)
		if err != nil {
			return fmt.Errorf("--label-selector=%q: %w", c.labelSelector, err)
		}
		c.selector = sel
	}
	return nil
}

// checkDialects: which annotations wave reads, and Stakater Reloader's flags.
func checkDialects(c *config) error {
	var err error
	if c.dialects, err = rollout.ParseDialects(c.annotations); err != nil {
		return err
	}
	if err := c.stakater.check(&c.stakaterOpts); err != nil {
		return err
	}
	if c.csi, err = c.stakater.csiIntegration(); err != nil {
		return err
	}
	c.stakaterOpts.Dialect.SecretProviderClasses = c.csi
	return nil
}

// checkHash: the formula of the hash, its key, and the install key of the records.
func checkHash(c *config) error {
	var err error
	if c.format, err = confighash.ParseHashFormat(c.hashFormat); err != nil {
		return err
	}
	if c.hashKeyFile != "" {
		key, err := readKey(c.hashKeyFile)
		if err != nil {
			return fmt.Errorf("--hash-key-file=%q: %w", c.hashKeyFile, err)
		}
		if c.hashKey = key; len(c.hashKey) < 16 {
			return fmt.Errorf("--hash-key-file=%q: the key has %d bytes; use at least 16 random bytes (e.g. head -c 32 /dev/urandom | base64)", c.hashKeyFile, len(c.hashKey))
		}
	}
	if c.installKey != "" && c.hashKeyFile == "" {
		c.installKeyNS, c.installKeyName = configref.DefaultNamespace(), c.installKey
		if ns, name, ok := strings.Cut(c.installKey, "/"); ok {
			c.installKeyNS, c.installKeyName = ns, name
		}
		if len(validation.IsDNS1123Label(c.installKeyNS)) > 0 || len(validation.IsDNS1123Subdomain(c.installKeyName)) > 0 {
			return fmt.Errorf("--install-key-secret=%q: give a Secret as NAME or NAMESPACE/NAME", c.installKey)
		}
	}
	return nil
}

// checkPacing: rates, periods and limits.
func checkPacing(c *config) error {
	switch {
	case c.syncPeriod < time.Second:
		return fmt.Errorf("--sync-period=%s: use at least 1s (default 5m)", c.syncPeriod)
	case c.qps <= 0 || c.burst < 1:
		return fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive")
	case c.workers < 1:
		return fmt.Errorf("--workers=%d: use at least 1", c.workers)
	case c.coalesce < 0 || c.coalesce > time.Second:
		return fmt.Errorf("--coalesce=%s: use 0 (roll at once) up to 1s", c.coalesce)
	case checkWindow(c) != nil:
		return checkWindow(c)
	case checkFlapping(c) != nil:
		return checkFlapping(c)
	case c.maxInFlight < 0 || c.maxInFlightPerNamespace < 0:
		return fmt.Errorf("--max-rollouts-in-flight=%d --max-rollouts-in-flight-per-namespace=%d: use 0 (no cap) or more", c.maxInFlight, c.maxInFlightPerNamespace)
	case c.minInterval < 0 || c.minInterval > 24*time.Hour:
		return fmt.Errorf("--min-rollout-interval=%s: use 0 (none) up to 24h", c.minInterval)
	case c.updateRate < 0 || c.updateBurst < 1:
		return fmt.Errorf("--update-rate=%g --update-burst=%d: use a rate of 0 (no limit) or more rollouts per second, and a burst of at least 1", c.updateRate, c.updateBurst)
	case c.rolloutDeadline < 0:
		return fmt.Errorf("--rollout-deadline=%s: use a positive duration, or 0 to never fail a rollout on time alone", c.rolloutDeadline)
	case c.leaderElection && !(c.leaseDuration >= time.Second && c.leaseDuration > c.renewDeadline && float64(c.renewDeadline) > leader.Jitter*float64(c.retryPeriod) && c.retryPeriod > 0):
		// A Lease counts whole seconds; the standbys' tries are spread over 1.2 retry periods.
		return fmt.Errorf("leader election needs --leader-election-lease-duration > --leader-election-renew-deadline > %g × --leader-election-retry-period > 0, and a lease duration of at least 1s; got %s, %s and %s",
			leader.Jitter, c.leaseDuration, c.renewDeadline, c.retryPeriod)
	}
	return nil
}

// checkWebhooks: where alerts and Reloader's --webhook-url changes go.
func checkWebhooks(c *config) error {
	var err error
	if c.reloadAlerts, err = c.reloadAlertEnv.Webhook(c.allowHTTPWebhooks); err != nil {
		return err
	}
	if c.notifyWebhook != "" {
		if c.webhook, err = alert.NewWith(c.notifyWebhook, alert.Options{AllowHTTP: c.allowHTTPWebhooks}); err != nil {
			return fmt.Errorf("--notify-webhook: %w", err)
		}
	}
	if c.stakater.webhookURL != "" {
		if c.changeWebhook, err = alert.NewWith(c.stakater.webhookURL, alert.Options{Format: alert.StakaterWebhook, Setting: "--webhook-url", AllowHTTP: c.allowHTTPWebhooks}); err != nil {
			return fmt.Errorf("--webhook-url: %w", err)
		}
	}
	return nil
}

// checkRevisionsWebhook: where the revisions webhook's certificate comes from.
func checkRevisionsWebhook(c *config) error {
	if c.revisionsWebhookCertSecret == "" {
		if c.revisionsWebhookService != "" || c.revisionsWebhookConfiguration != "" {
			return fmt.Errorf("--revisions-webhook-service and --revisions-webhook-configuration go with --revisions-webhook-cert-secret, the Secret wave keeps the webhook's certificate in: give it too, or drop them and mount a certificate in --revisions-webhook-cert-dir")
		}
		return nil
	}
	if c.revisionsWebhookAddress == "" {
		return fmt.Errorf("--revisions-webhook-cert-secret=%q: the webhook is not served; give --revisions-webhook-address too", c.revisionsWebhookCertSecret)
	}
	c.webhookCertNS, c.webhookCertName = configref.DefaultNamespace(), c.revisionsWebhookCertSecret
	if ns, name, ok := strings.Cut(c.revisionsWebhookCertSecret, "/"); ok {
		c.webhookCertNS, c.webhookCertName = ns, name
	}
	if len(validation.IsDNS1123Label(c.webhookCertNS)) > 0 || len(validation.IsDNS1123Subdomain(c.webhookCertName)) > 0 {
		return fmt.Errorf("--revisions-webhook-cert-secret=%q: give a Secret as NAME or NAMESPACE/NAME", c.revisionsWebhookCertSecret)
	}
	if errs := validation.IsDNS1035Label(c.revisionsWebhookService); len(errs) > 0 {
		return fmt.Errorf("--revisions-webhook-service=%q: give the name of the webhook's Service in namespace %s, which the certificate is made for (%s)", c.revisionsWebhookService, c.webhookCertNS, strings.Join(errs, "; "))
	}
	if c.revisionsWebhookConfiguration != "" && len(validation.IsDNS1123Subdomain(c.revisionsWebhookConfiguration)) > 0 {
		return fmt.Errorf("--revisions-webhook-configuration=%q: give the name of a MutatingWebhookConfiguration", c.revisionsWebhookConfiguration)
	}
	return nil
}

// checkLeaderElection: the Lease.
func checkLeaderElection(c *config) error {
	if c.leaderElection {
		if errs := validation.IsDNS1123Subdomain(c.leaderID); len(errs) > 0 {
			return fmt.Errorf("--leader-election-id=%q is not a valid Lease name", c.leaderID)
		}
		if c.leaderNamespace == "" {
			c.leaderNamespace = configref.DefaultNamespace()
		}
	}
	return nil
}

// checkWindow reads --rollout-window into c.window.
func checkWindow(c *config) error {
	w, err := window.Parse(c.rolloutWindow)
	if err != nil {
		return fmt.Errorf("--rollout-window: %w", err)
	}
	c.window = w
	return nil
}

// checkFlapping reads --flapping-threshold into c.flappingRule.
func checkFlapping(c *config) error {
	r, err := brake.ParseRule(c.flapping)
	if err != nil {
		return fmt.Errorf("--flapping-threshold=%w", err)
	}
	c.flappingRule = r
	return nil
}
