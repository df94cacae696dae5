package startup

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	flag "github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// LogFormat is --log-format: text (klog's own lines) or json (one JSON object per line, the
// format log pipelines parse without a regex). Each peer's name for text is accepted:
// prometheus-config-reloader's logfmt and Stakater Reloader's empty string.
type LogFormat string

func (f *LogFormat) String() string { return string(*f) }
func (f *LogFormat) Type() string   { return "string" }

// Set implements pflag.Value.
func (f *LogFormat) Set(s string) error {
	switch strings.ToLower(s) {
	case "", "text", "logfmt":
		*f = "text"
	case "json":
		*f = "json"
	default:
		return fmt.Errorf("use text or json")
	}
	return nil
}

// LogLevel is --log-level, the peers' way to set the verbosity: prometheus-config-reloader's
// debug, info, warn and error, Stakater Reloader's trace, debug, info, warning, error, fatal
// and panic. klog has no threshold above info, so the levels above info log as info does.
type LogLevel string

func (l *LogLevel) String() string { return string(*l) }
func (l *LogLevel) Type() string   { return "string" }

// Set implements pflag.Value.
func (l *LogLevel) Set(s string) error {
	if _, ok := logLevels[strings.ToLower(s)]; !ok {
		return fmt.Errorf("use trace, debug, info, warn or error")
	}
	*l = LogLevel(strings.ToLower(s))
	return nil
}

// levels maps each peer's level to a klog verbosity.
var logLevels = map[string]int{"trace": MaxVerbosity, "debug": 4, "info": 0, "warn": 0, "warning": 0, "error": 0, "fatal": 0, "panic": 0}

// addLogFormat registers --log-format and --log-level on fs.
func addLogFormat(fs *flag.FlagSet) {
	format := LogFormat("text")
	fs.Var(&format, "log-format", "text, or json for one JSON object per line; logfmt (prometheus-config-reloader's) is text.")
	var level LogLevel
	fs.Var(&level, "log-level", "the peers' log level: trace (--v=5), debug (--v=4), info, warn or error (--v=0: klog logs info and above alike). --v wins when both are given.")
}

// ApplyLogFormat sets the verbosity from --log-level unless --v was given, and makes klog write JSON for
// --log-format=json. Call it once, after parsing and before anything is logged.
func ApplyLogFormat(fs *flag.FlagSet) {
	if f := fs.Lookup("log-level"); f != nil && f.Value.String() != "" && !fs.Changed("v") {
		if v := fs.Lookup("v"); v != nil {
			_ = v.Value.Set(strconv.Itoa(logLevels[f.Value.String()]))
		}
	}
	if f := fs.Lookup("log-format"); f != nil && f.Value.String() == "json" {
		// klog checks --v and --vmodule itself and passes the rest on at slog level -V, so
		// the handler lets every level through.
		h := slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.Level(-MaxVerbosity)})
		klog.SetSlogLogger(slog.New(h))
	}
}
