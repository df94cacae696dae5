package main

import (
	"sort"

	flag "github.com/spf13/pflag"
)

// waveOnlyFlags are Wave's (wave-k8s) flags that wave has no use for, beyond those they share
// (--leader-election, --leader-election-id, --leader-election-namespace, --sync-period,
// --version). They are accepted, so that Wave's Deployment arguments carry over unchanged, and
// named in the log as ignored: wave needs no admission webhook (creating a workload rolls
// nothing), and logs with klog (--v).
var waveOnlyFlags = []string{"enable-webhooks", "zap-devel", "zap-encoder", "zap-log-level", "zap-stacktrace-level", "zap-time-encoding"}

type waveFlags map[string]*string

func (w *waveFlags) add(fs *flag.FlagSet) {
	*w = waveFlags{}
	for _, name := range waveOnlyFlags {
		(*w)[name] = fs.String(name, "", "")
		fs.Lookup(name).NoOptDefVal = "true"
		_ = fs.MarkHidden(name)
	}
}

// given lists the ones set, for the log.
func (w waveFlags) given() []string {
	var out []string
	for name, v := range w {
		if *v != "" {
			out = append(out, "--"+name)
		}
	}
	sort.Strings(out)
	return out
}
