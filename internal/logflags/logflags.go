// Package logflags gives both binaries klog's --v and --vmodule, and keeps the verbosity below
// the level where client-go logs API response bodies, which carry Secret values.
package logflags

import (
	goflag "flag"
	"strconv"

	flag "github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// MaxVerbosity is the highest --v that takes effect. client-go logs request URLs at 6,
// headers at 7 and response bodies (whole Secrets) from 8.
const MaxVerbosity = 5

// Add registers --v and --vmodule on fs; usage describes what each level logs.
func Add(fs *flag.FlagSet, usage string) {
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	for _, name := range []string{"v", "vmodule"} {
		f := flag.PFlagFromGoFlag(klogFlags.Lookup(name))
		if name == "v" {
			f.Usage = usage + " Values above " + strconv.Itoa(MaxVerbosity) + " act as " + strconv.Itoa(MaxVerbosity) + ": client-go would log API responses, Secrets included."
		}
		fs.AddFlag(f)
	}
}

// Cap lowers the verbosity to MaxVerbosity after parsing, and says so.
func Cap(fs *flag.FlagSet) {
	f := fs.Lookup("v")
	if f == nil {
		return
	}
	if v, err := strconv.Atoi(f.Value.String()); err == nil && v > MaxVerbosity {
		_ = f.Value.Set(strconv.Itoa(MaxVerbosity))
		klog.InfoS("log verbosity capped: above it client-go logs API responses, which hold Secret values", "requested", v, "used", MaxVerbosity)
	}
}
