package startup

// The log flags: klog's --v and --vmodule, the peers' --log-format (text or JSON) and
// --log-level, with the verbosity kept below the level where client-go logs API response
// bodies, which carry Secret values.

import (
	goflag "flag"
	"strconv"
	"strings"

	flag "github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// MaxVerbosity is the highest --v that takes effect. client-go logs request URLs at 6,
// headers at 7 and response bodies (whole Secrets) from 8.
const MaxVerbosity = 5

// AddLogFlags registers --v, --vmodule, --log-format and --log-level on fs; usage describes what each
// level of --v logs.
func AddLogFlags(fs *flag.FlagSet, usage string) {
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	for _, name := range []string{"v", "vmodule"} {
		f := flag.PFlagFromGoFlag(klogFlags.Lookup(name))
		switch name {
		case "v":
			f.Usage = usage + " Values above " + strconv.Itoa(MaxVerbosity) + " act as " + strconv.Itoa(MaxVerbosity) + ": client-go would log API responses, Secrets included."
		case "vmodule":
			f.Usage = "per-file verbosity, as pattern=N,... (e.g. reload=4); levels above " + strconv.Itoa(MaxVerbosity) + " act as " + strconv.Itoa(MaxVerbosity) + ", as for --v."
		}
		fs.AddFlag(f)
	}
	addLogFormat(fs)
}

// CapLogVerbosity lowers the verbosity to MaxVerbosity after parsing, --v and every --vmodule entry
// alike (--vmodule=*=10 would otherwise reach client-go's body logging), and says so.
func CapLogVerbosity(fs *flag.FlagSet) {
	if f := fs.Lookup("v"); f != nil {
		if v, err := strconv.Atoi(f.Value.String()); err == nil && v > MaxVerbosity {
			_ = f.Value.Set(strconv.Itoa(MaxVerbosity))
			klog.InfoS("log verbosity capped: above it client-go logs API responses, which hold Secret values", "requested", v, "used", MaxVerbosity)
		}
	}
	if f := fs.Lookup("vmodule"); f != nil {
		if capped, changed := CapVModule(f.Value.String()); changed {
			_ = f.Value.Set(capped)
			klog.InfoS("--vmodule levels capped: above it client-go logs API responses, which hold Secret values", "used", capped)
		}
	}
}

// CapVModule lowers every level of a pattern=N,... list above MaxVerbosity to it. Entries it
// cannot read are kept as they are: klog has already refused them at parse time.
func CapVModule(s string) (string, bool) {
	if s == "" {
		return s, false
	}
	parts := strings.Split(s, ",")
	changed := false
	for i, p := range parts {
		pattern, level, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(level); err == nil && n > MaxVerbosity {
			parts[i] = pattern + "=" + strconv.Itoa(MaxVerbosity)
			changed = true
		}
	}
	return strings.Join(parts, ","), changed
}
