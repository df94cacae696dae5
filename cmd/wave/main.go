// Command wave rolls Deployments, StatefulSets and DaemonSets when the ConfigMaps and Secrets
// their pods use change, for apps that read config only at start. It is a drop-in replacement
// for Wave (same annotations, same hash) without owner references, finalizers or extra
// rollouts.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	_ "time/tzdata" // the image has no zoneinfo: --rollout-window's zones are built in

	"github.com/oklog/run"
	flag "github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/process/credfile"
	"github.com/configwave/configwave/internal/process/serve"
	"github.com/configwave/configwave/internal/process/startup"
	"github.com/configwave/configwave/internal/wave/brake"
	"github.com/configwave/configwave/internal/wave/confighash"
	"github.com/configwave/configwave/internal/wave/migrate"
	"github.com/configwave/configwave/internal/wave/rollout"
	"github.com/configwave/configwave/internal/wave/stakatermetrics"
	"github.com/configwave/configwave/internal/wave/workload"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() { os.Exit(runMain(os.Args[1:])) }

func runMain(args []string) int {
	if k8sSidecarStart(args, os.Getenv) {
		err := handOverToReloader()
		fmt.Fprintf(os.Stderr, "wave: started with k8s-sidecar's environment (LABEL, FOLDER) and no arguments, which the reloader reads, but %v; give the container the command /reloader\n", err)
		return 2
	}
	if len(args) > 0 && args[0] == "status" {
		return runStatus(args[1:], os.Stdout)
	}
	var o options
	fs := newFlagSet(&o)
	if code, stop := startup.Parse("wave", fs, args, &o.version, version); stop {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "wave: unexpected argument %q; wave takes flags only\n", fs.Arg(0))
		return 2
	}
	cfg, err := o.check()
	if err != nil {
		fmt.Fprintf(os.Stderr, "wave: %v\n", err)
		return 2
	}
	defer klog.Flush()
	if soft := startup.ApplyMemoryLimit(startup.DefaultMemoryLimitRatio, os.LookupEnv, os.DirFS("/sys/fs/cgroup")); soft > 0 {
		klog.V(2).InfoS("Go's memory limit set from the container's", "bytes", soft)
	}
	for _, note := range o.stakater.notes() {
		klog.InfoS(note)
	}
	if err := runWave(cfg); err != nil && !errors.Is(err, run.ErrSignal) {
		klog.ErrorS(err, "wave stopped")
		return 1
	}
	return 0
}

type options struct {
	namespaces         string
	labelSelector      string
	annotations        string
	syncPeriod         time.Duration
	leaderElection     bool
	leaderID           string
	leaderNamespace    string
	leaseDuration      time.Duration
	renewDeadline      time.Duration
	retryPeriod        time.Duration
	qps                float32
	burst              int
	workers            int
	hashFormat         string
	hashKeyFile        string
	installKey         string
	dryRun             bool
	allowHTTPWebhooks  bool
	crashLoopDetection bool
	crossNamespace     bool
	configRevisions    bool
	// the admission webhook that points a revision's pods at their snapshots
	revisionsWebhookAddress, revisionsWebhookCertDir string
	// wave's own certificate for it: the Secret, the Service it serves, the configuration
	revisionsWebhookCertSecret, revisionsWebhookService, revisionsWebhookConfiguration string
	rolloutDeadline                                                                    time.Duration
	coalesce                                                                           time.Duration
	minInterval                                                                        time.Duration
	rolloutWindow                                                                      string
	flapping                                                                           string
	sourceReadyTimeout                                                                 time.Duration
	waitForSecretWriters                                                               bool
	maxInFlight, maxInFlightPerNamespace                                               int
	updateRate                                                                         float64
	updateBurst                                                                        int
	notifyWebhook                                                                      string
	migrate                                                                            bool
	listenAddress                                                                      string
	kubeconfig                                                                         string
	version                                                                            bool
	stakater                                                                           stakaterFlags
	waveOnly                                                                           waveFlags
	metricsAddr                                                                        string                 // Wave's --metrics-addr: --listen-address
	changed                                                                            func(name string) bool // whether a flag was given
	stakaterListen                                                                     string                 // --reloader-listen-address
	getenv                                                                             func(string) string    // os.Getenv; tests give their own
}

func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("wave", flag.ContinueOnError)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `wave rolls a Deployment, StatefulSet or DaemonSet annotated
  wave.pusher.com/update-on-config-change: "true"
when a ConfigMap or Secret its pods use changes, by writing Wave's hash of them to
  spec.template.metadata.annotations["wave.pusher.com/config-hash"].
"wave status" lists those workloads and whether their pods run the current config.

Flags:
%s`, fs.FlagUsages())
	}
	fs.StringVar(&o.namespaces, "namespaces", "", "comma-separated namespaces to watch; empty watches all.")
	fs.StringVar(&o.labelSelector, "label-selector", "", "only manage workloads whose labels match this selector.")
	fs.StringVar(&o.annotations, "annotations", "wave,stakater", `annotation dialects read: "wave" (wave.pusher.com/update-on-config-change and extra-*), "stakater" (Stakater Reloader's reloader.stakater.com/auto, configmap.reloader.stakater.com/reload, search and match, excludes, ignore), or both. A workload that speaks both rolls once per change.`)
	fs.DurationVar(&o.syncPeriod, "sync-period", 5*time.Minute, "how often every workload is reconciled even without a change (a reconcile that finds nothing to do writes nothing).")
	fs.BoolVar(&o.leaderElection, "leader-election", false, "run several replicas; only the holder of a Lease reconciles.")
	fs.StringVar(&o.leaderID, "leader-election-id", "configwave-wave", "name of the Lease.")
	fs.StringVar(&o.leaderNamespace, "leader-election-namespace", "", "namespace of the Lease (default: the pod's own namespace).")
	fs.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a Lease lasts when its holder stops renewing it.")
	fs.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader retries renewing before it gives up leadership (and exits).")
	fs.DurationVar(&o.retryPeriod, "leader-election-retry-period", 2*time.Second, "how often candidates try to acquire or renew the Lease.")
	fs.Float32Var(&o.qps, "kube-api-qps", 200, "API requests per second, sustained; patches of a ConfigMap shared by 1,000 workloads take about 1000/QPS seconds.")
	fs.IntVar(&o.burst, "kube-api-burst", 400, "API requests allowed in a burst above --kube-api-qps.")
	fs.IntVar(&o.workers, "workers", 16, "workloads reconciled in parallel: enough requests in flight that --kube-api-qps, not the API server's answer time, bounds how fast a change shared by many workloads is written.")
	fs.StringVar(&o.hashFormat, "hash-format", string(confighash.HashWave), `formula of the config hash wave writes: "wave" (Wave 0.9 and later), "wave-v07" (Wave 0.7 and 0.8) or "wave-v05" (Wave 0.6 and earlier). A workload first seen with any of the three hashes of its current config is adopted without a rollout, whatever this says.`)
	fs.StringVar(&o.hashKeyFile, "hash-key-file", "", "file holding a key (mount it from a Secret); the config hash becomes HMAC-SHA256 under it, so that nobody who can read a Deployment can test guesses of a Secret value against the hash. Not Wave's value: switching from Wave with a key rolls each workload once.")
	fs.StringVar(&o.installKey, "install-key-secret", "configwave-install-key", "Secret ([NAMESPACE/]NAME, default namespace: wave's own) holding the install key, 32 random bytes under \"key\" that key the digests of the configwave.io/config-inputs records, so that they test no guess of a Secret value. wave creates it on first start where RBAC lets it create Secrets there (a ResourceQuota that refuses it is waited out, not ready meanwhile); it is kept nowhere but in a Secret. Where it is absent and wave may not create it (a peer's chart), wave runs without a key: the records carry each Secret's uid and resourceVersion instead of digests of its values, so any write to a Secret, even of its metadata alone, rolls the workloads that use it; create the Secret to key them. When it exists and cannot be read, or is too short, wave exits and writes nothing. It keys the template hash too of a workload that had no Wave hash when wave first saw it; a Wave hash already there stays Wave's. Not read with --hash-key-file. Empty: plain digests of the values, on purpose: whoever can read the workloads can then test guesses of Secret values against them.")
	fs.BoolVar(&o.configRevisions, "config-revisions", false, "every opted-in workload keeps the config of each revision (as configwave.io/revisions: \"true\" on a workload does; \"false\" there opts it out): wave copies each content of a ConfigMap or Secret its pods use into an immutable snapshot before it rolls, and pods of that revision read the snapshots, so that kubectl rollout undo brings the old config back with the old template. Turning it on rolls each workload once. Needs create on configmaps and secrets (config/wave-revisions); see docs/revisions.md.")
	fs.StringVar(&o.revisionsWebhookAddress, "revisions-webhook-address", "", "serve the admission webhook of config revisions (HTTPS, path /mutate-pods) on this address, e.g. :9443: it points each new pod of a revision at that revision's snapshots. Register it with failurePolicy Ignore (the chart does), so that a pod is never held up by it. Empty: not served; pods then read the live objects.")
	fs.StringVar(&o.revisionsWebhookCertDir, "revisions-webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "folder holding the webhook's certificate and key as tls.crt and tls.key (a cert-manager Certificate's Secret mounted there); read again when they change. Not read with --revisions-webhook-cert-secret.")
	fs.StringVar(&o.revisionsWebhookCertSecret, "revisions-webhook-cert-secret", "", "make and keep the webhook's certificate in this Secret ([NAMESPACE/]NAME, default namespace: wave's own), for a cluster without cert-manager: a CA and a serving certificate for --revisions-webhook-service, made by the first replica, renewed before either ends (the serving certificate 30 days before, under the same CA), served by every replica. Needs get, create and update on it. Empty: the certificate is read from --revisions-webhook-cert-dir.")
	fs.StringVar(&o.revisionsWebhookService, "revisions-webhook-service", "", "with --revisions-webhook-cert-secret: the Service, in the Secret's namespace, through which the API server calls the webhook; the certificate is made for NAME.NAMESPACE.svc and NAME.NAMESPACE.svc.cluster.local.")
	fs.StringVar(&o.revisionsWebhookConfiguration, "revisions-webhook-configuration", "", "with --revisions-webhook-cert-secret: the MutatingWebhookConfiguration whose caBundle wave keeps at its CA, put back within 5 minutes when a GitOps sync empties it. Needs get and update on it. Empty: put the Secret's ca.crt there yourself.")
	fs.BoolVar(&o.dryRun, "dry-run", false, "decide, log and emit Events, but write nothing.")
	fs.BoolVar(&o.crossNamespace, "allow-cross-namespace-refs", false, "let wave.pusher.com/extra-configmaps and extra-secrets name objects in other namespaces (Wave's behaviour). Off by default: whoever may edit a workload could otherwise make wave read another tenant's config and publish a hash of it.")
	fs.DurationVar(&o.coalesce, "coalesce", defaultCoalesce, "after the first change that reaches a quiet workload, wait this long for more before rolling, so that a ConfigMap and a Secret changed together (one kubectl apply, one Helm upgrade) roll it once. At most 1s; 0 rolls at once.")
	fs.IntVar(&o.maxInFlight, "max-rollouts-in-flight", 0, "at most this many config rollouts under way at once across the cluster: the next starts when one rolls out or fails, the longest waiting first (a ConfigRolloutQueued Event, configwave_wave_rollouts_queued). 0: no cap.")
	fs.IntVar(&o.maxInFlightPerNamespace, "max-rollouts-in-flight-per-namespace", 0, "the same cap within each namespace. 0: no cap.")
	fs.DurationVar(&o.sourceReadyTimeout, "source-ready-timeout", 10*time.Minute, `how long a rollout waits for a Secret it follows whose content is incomplete (a kubernetes.io/tls Secret whose tls.crt and tls.key are not a pair: a renewal half-written; or one whose cert-manager Certificate or External Secrets ExternalSecret does not say it is done) before it rolls all the same, saying so in a ConfigSourceIncomplete Event. 0: never waits, and reads neither kind.`)
	fs.BoolVar(&o.waitForSecretWriters, "wait-for-secret-writers", true, "a rollout of a change of a Secret that cert-manager or External Secrets writes waits (at most --source-ready-timeout) until its Certificate or ExternalSecret says it is done: an issuance under way, a spec not synced yet. Reads certificates (cert-manager.io) and externalsecrets (external-secrets.io) where their CRDs are served when wave starts and it may list and watch them (else one line says what to grant). false: reads neither.")
	fs.StringVar(&o.flapping, "flapping-threshold", brake.Default.String(), `a ConfigMap or Secret that changes this often ("WRITES/DURATION") stops rolling the workloads that follow it until it is quiet for DURATION: a ConfigFlapping Event on it and on them, configwave_wave_sources_braked. The default never brakes a person's edits and brakes a machine writing twice a second after 5s. 0: never.`)
	fs.StringVar(&o.rolloutWindow, "rollout-window", "", `when a config rollout may start, for every workload without its own configwave.io/rollout-window: "DAYS HH:MM-HH:MM ZONE", several joined by ";" ("Mon-Fri 09:00-17:00 Europe/Berlin; Sat 10:00-11:00 UTC"). A change outside it rolls when it opens; configwave.io/rollout-now: "true" on a workload rolls it at once. Empty: always.`)
	fs.DurationVar(&o.minInterval, "min-rollout-interval", 0, "at least this long between two rollouts wave causes on one workload (a workload's configwave.io/min-rollout-interval or Reloader's deployment.reloader.stakater.com/pause-period annotation may raise it); changes in the meantime roll together when it ends. A brake on runaway writers. 0: none.")
	fs.Float64Var(&o.updateRate, "update-rate", 0, "at most this many rollouts per second across all workloads (Wave's flag), so that a ConfigMap every workload uses does not restart them all at once; workloads wait their turn, first come first served, and none is skipped. 0: no limit.")
	fs.IntVar(&o.updateBurst, "update-burst", 1, "rollouts allowed at once above --update-rate (Wave's flag).")
	fs.DurationVar(&o.rolloutDeadline, "rollout-deadline", 10*time.Minute, "a StatefulSet or DaemonSet rollout that wave caused and that is not complete after this long counts as failed: a ConfigRolloutFailed Event, the rollouts metric, /status and --notify-webhook say so (a Deployment's own progressDeadlineSeconds decides for it). 0 never.")
	fs.BoolVar(&o.crashLoopDetection, "crash-loop-detection", true, "list the pods of a rollout wave caused, to report new pods that crash-loop at once (needs list on pods, which shows every pod spec); false: the workload's own status and --rollout-deadline tell.")
	fs.BoolVar(&o.allowHTTPWebhooks, "allow-http-webhooks", false, "accept an http:// URL in --notify-webhook and ALERT_WEBHOOK_URL for a host other than loopback; the alerts and the URL, often a credential, then cross the network unencrypted.")
	fs.StringVar(&o.notifyWebhook, "notify-webhook", "", `URL that gets a Slack-style {"text": ...} POST for each config rollout that failed, and for the recovery after it; "@FILE" reads the URL from a file (mount it from a Secret: the URL is a credential). Names workloads and objects, never a value.`)
	fs.BoolVar(&o.migrate, "migrate-from-wave-v05", false, "one-shot: remove the owner references Wave 0.6 and earlier put on ConfigMaps and Secrets and its finalizer on workloads, then exit. Needs update on ConfigMaps, Secrets and workloads; see docs/migrating.md (config/wave-migrate runs it as a Job).")
	fs.StringVar(&o.listenAddress, "listen-address", defaultListenAddress, "address of /healthz, /readyz, /metrics and /status (JSON: the config rollouts that failed); empty disables them.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; default $KUBECONFIG, ~/.kube/config, else the pod's service account.")
	fs.BoolVar(&o.version, "version", false, "print the version and exit.")
	o.stakater.add(fs)
	o.waveOnly.add(fs)
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "Wave's name of --listen-address (deprecated).")
	_ = fs.MarkHidden("metrics-addr")
	startup.AddLogFlags(fs, "log verbosity: 2 logs every decision, 4 every event.")
	addStakaterEnvFlags(fs, o)
	o.changed = fs.Changed
	o.getenv = os.Getenv
	return fs
}

// parseNamespaces reads --namespaces: names separated by commas, blanks around them ignored.
func parseNamespaces(value string) ([]string, error) {
	var out []string
	for _, ns := range strings.Split(value, ",") {
		if ns = strings.TrimSpace(ns); ns == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("--namespaces: %q is not a namespace name (%s)", ns, strings.Join(errs, "; "))
		}
		out = append(out, ns)
	}
	return out, nil
}

// maxKeySize bounds what --hash-key-file reads: a key is a few dozen bytes, and a wrong path
// (a log, /dev/zero) must not be read into memory.
const maxKeySize = 4096

// readKey reads the HMAC key; surrounding whitespace (a trailing newline) is not part of it.
func readKey(name string) ([]byte, error) { return credfile.Read(name, maxKeySize, "the key") }

// runWave runs wave as cfg says until it is stopped or loses its Lease: build the clients,
// serve the endpoints, load the digest key, fill the caches, make the controller, then run
// every part.
func runWave(cfg *config) error {
	reg := serve.NewRegistry("wave", startup.Version(version))
	cl, err := newClients(cfg, reg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if cfg.migrate {
		rep, err := migrate.FromWaveV05(ctx, cl.kube, cfg.namespaceList, cfg.dryRun)
		klog.InfoS("migration from Wave 0.5 finished", "ownerReferencesRemoved", rep.OwnerReferencesRemoved, "finalizersRemoved", rep.FinalizersRemoved, "dryRun", cfg.dryRun)
		return err
	}
	recorder, stopEvents := recordEvents(ctx, cl.events)
	defer stopEvents() // after the controller stopped: nothing emits any more
	// Stakater Reloader's series are there from the first scrape, as in Reloader: the
	// endpoints serve from the start.
	stakater := stakatermetrics.NewStakaterReloader(reg, cfg.countByNamespace)
	ep, err := startEndpoints(cfg, reg)
	if err != nil {
		return err
	}
	defer ep.stop()                              // unless the run group took them over
	var caches atomic.Pointer[rollout.Informers] // for the webhook's Events, once they are made
	adopt := startAdopter(ctx, cl, reg)
	if srv, err := startRevisionWebhook(ctx, cfg, cl, reg, adopt, caches.Load, recorder); err != nil {
		return err
	} else if srv != nil {
		ep.serve(srv)
	}
	if cfg.installKeyName != "" {
		ep.waitingFor("the install key, Secret " + cfg.installKeyNS + "/" + cfg.installKeyName + " (the log says why)")
	}
	// A stop while wave waits for its key (past a ResourceQuota) ends the wait: nothing written.
	keyCtx, stopWaiting := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	dg, err := loadDigestKey(keyCtx, cl.kube, cfg)
	stopped := keyCtx.Err() != nil
	stopWaiting()
	switch {
	case err != nil && stopped:
		return fmt.Errorf("%w while waiting for the install key", run.ErrSignal)
	case err != nil:
		return err
	}
	registerRecordsMode(reg, dg.mode)
	ep.waitingFor("")
	kinds, err := checkKindAccess(ctx, cl.kube, cl.kinds, cfg.namespaceList)
	if err != nil {
		return err
	}
	kinds.register(reg)
	kinds.logNotes()
	if err := checkPodAccess(ctx, cfg, cl); err != nil {
		return err
	}
	inf, err := newInformers(ctx, cfg, cl, dg, kinds)
	if err != nil {
		return err
	}
	caches.Store(inf)
	w, err := newWork(cfg, cl, inf, recorder, reg, dg.key, stakater, adopt)
	if err != nil {
		return err
	}
	g, err := waveActors(ctx, cfg, cl, inf, w, ep)
	if err != nil {
		return err
	}
	ep.answerFrom(endpointAnswers{ready: inf.HasSynced, detail: kinds.readyDetail, status: w.ctrl.Status})
	logStart(cfg, cl, dg)
	return g.Run()
}

// logStart says what runs, and what of the peers' flags was taken without effect.
func logStart(cfg *config, cl *clients, dg digests) {
	if cfg.reloadAlerts != nil {
		klog.InfoS("alerting on every rollout, as Stakater Reloader's ALERT_ON_RELOAD asks", "webhook", cfg.reloadAlerts.Host(), "sink", cfg.reloadAlertEnv.Sink)
	}
	if cfg.changeWebhook != nil {
		klog.InfoS("Stakater Reloader's --webhook-url: every change of a ConfigMap's or Secret's data is told to the webhook, and no workload is written", "webhook", cfg.changeWebhook.Host())
	}
	if ignored := cfg.waveOnly.given(); len(ignored) > 0 {
		klog.InfoS("Wave's flags accepted and ignored: wave needs no admission webhook, and logs with --v", "flags", ignored)
	}
	if cfg.stakater.isArgoRollouts != "" {
		klog.InfoS("Stakater Reloader's --is-Argo-Rollouts accepted and ignored: wave rolls Argo Rollouts wherever their CustomResourceDefinition is served", "served", slices.ContainsFunc(cl.kinds, func(t workload.Type) bool { return t.Kind() == workload.ArgoRollout }))
	}
	if cfg.metricsAddr != "" {
		klog.InfoS("--metrics-addr is deprecated: use --listen-address, which serves /metrics beside /healthz, /readyz and /status", "address", cfg.listenAddress)
	}
	klog.InfoS("wave started", "version", startup.Version(version), "namespaces", cfg.namespaceList, "labelSelector", cfg.selector.String(), "annotations", cfg.annotations,
		"hashFormat", cfg.format, "keyedHash", len(cfg.hashKey) > 0, "keyedInputs", len(dg.key) > 0, "records", dg.mode, "dryRun", cfg.dryRun, "leaderElection", cfg.leaderElection)
}

// defaultListenAddress serves /metrics where Wave's --metrics-addr did by default.
const defaultListenAddress = ":8080"

// defaultCoalesce covers the requests of one kubectl apply or Helm upgrade, which arrive a few
// milliseconds apart, with room for a slow client; it is the whole of the added latency.
const defaultCoalesce = 200 * time.Millisecond
