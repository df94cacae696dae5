package main

import (
	"fmt"

	flag "github.com/spf13/pflag"

	"github.com/configwave/configwave/internal/notify"
	"github.com/configwave/configwave/internal/source"
)

// configmap-reload's flags (jimmidyson/configmap-reload, as its main parses them), so that a
// sidecar of it keeps its arguments and changes only its image. Each is a second name for one
// of ours; the migration table in docs/migrating.md says where we differ.
func addConfigmapReloadFlags(fs *flag.FlagSet, o *options) {
	fs.StringArrayVar(&o.reloadHTTP, "webhook-url", nil, "configmap-reload's name for --reload-http; repeatable.")
	fs.StringVar(&o.reloadMethod, "webhook-method", "POST", "configmap-reload's name for --reload-http-method.")
	fs.IntVar(&o.webhookStatusCode, "webhook-status-code", 0, "configmap-reload's: the one status code that means the app reloaded (default: --reload-http-success-codes, 200-299).")
	fs.IntVar(&o.webhookRetries, "webhook-retries", 0, "configmap-reload's: tries of one reload request (default: --reload-http-tries).")
	fs.StringVar(&o.listenAddress, "web.listen-address", ":9533", "configmap-reload's name for --listen-address.")
	fs.StringVar(&o.metricsPath, "web.telemetry-path", "/metrics", "configmap-reload's name for --metrics-path.")
}

// webhookSettings applies configmap-reload's --webhook-status-code and --webhook-retries.
func (o *options) webhookSettings(success *notify.CodeSet, tries *int) error {
	if o.changed("webhook-status-code") {
		if o.changed("reload-http-success-codes") {
			return fmt.Errorf("--webhook-status-code and --reload-http-success-codes both say which answers mean success; keep one")
		}
		set, err := notify.ParseCodeSet(fmt.Sprint(o.webhookStatusCode))
		if err != nil {
			return fmt.Errorf("--webhook-status-code: %w", err)
		}
		*success = set
	}
	if o.changed("webhook-retries") {
		if o.changed("reload-http-tries") {
			return fmt.Errorf("--webhook-retries and --reload-http-tries both count tries; keep one")
		}
		if o.webhookRetries < 1 {
			return fmt.Errorf("--webhook-retries=%d: must be at least 1", o.webhookRetries)
		}
		*tries = o.webhookRetries
	}
	return nil
}

// checkFolders checks the folder source's flags into c.
func (o *options) checkFolders(c *config) error {
	if err := o.promConfigReloader(c); err != nil {
		return err
	}
	if len(o.folders) == 0 {
		for _, f := range []string{"watch-ignore", "watch-interval"} {
			if o.changed(f) {
				return fmt.Errorf("--%s applies to --volume-dir; add it, or drop --%s", f, f)
			}
		}
		if o.changed("webhook-url") {
			c.peer = peerConfigmapReload
		}
		return nil
	}
	for _, f := range []string{"configroot", "items", "layout", "file-mode", "secret-file-mode", "once"} {
		if o.changed(f) {
			return fmt.Errorf("--%s applies to --configmap, --secret and --selector, which the reloader unpacks; a --volume-dir is read where it is: drop --%s", f, f)
		}
	}
	if len(o.configMaps)+len(o.secrets) > 0 || o.selector != "" { // checked before they are parsed
		return fmt.Errorf("--volume-dir watches mounted folders and --configmap, --secret and --selector read the API: one reloader takes one kind of source; run two")
	}
	if o.watchInterval < 0 {
		return fmt.Errorf("--watch-interval=%s: must be 0 (never) or more", o.watchInterval)
	}
	seen := map[string]bool{}
	for _, d := range o.folders {
		if d == "" {
			return fmt.Errorf("--volume-dir is empty: give the folder the volume is mounted at, e.g. /etc/config")
		}
		if !seen[d] {
			seen[d] = true
			c.folders = append(c.folders, d)
		}
	}
	c.folderOpts = source.FolderOptions{Ignore: o.watchIgnore, Interval: o.watchInterval, Settle: c.settle}
	if err := source.CheckIgnore(o.watchIgnore); err != nil {
		return fmt.Errorf("--watch-ignore: %w", err)
	}
	if c.peer == "" {
		c.peer = peerConfigmapReload
	}
	return nil
}
