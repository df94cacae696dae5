// Package startup is what both binaries do before their own work: parse flags alike, answer
// --help and --version, exit 2 with one line on bad flags, give klog's --v and --vmodule and the
// peers' --log-format and --log-level with the verbosity capped below the level where client-go
// logs API response bodies (which carry Secret values), and set Go's soft memory limit from the
// container's.
//
//	if code, stop := startup.Parse("wave", fs, os.Args[1:], &showVersion, version); stop {
//		os.Exit(code)
//	}
//	startup.ApplyMemoryLimit(startup.DefaultMemoryLimitRatio, os.LookupEnv, os.DirFS("/sys/fs/cgroup"))
package startup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	flag "github.com/spf13/pflag"
)

// Version is the version stamped at build time (-ldflags "-X main.version=..."), else the
// module version Go recorded, else "unknown".
func Version(stamped string) string {
	if stamped != "" {
		return stamped
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return "unknown"
}

// Parse parses args into fs. When the command must stop at once (--help, --version, a bad
// flag) it returns the exit code and true.
func Parse(name string, fs *flag.FlagSet, args []string, showVersion *bool, stamped string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		fmt.Fprintf(os.Stderr, "%s: %v (see %s --help)\n", name, err, name)
		return 2, true
	}
	ApplyLogFormat(fs) // first: the verbosity --log-level sets is capped too, and JSON from the first line
	CapLogVerbosity(fs)
	if *showVersion {
		fmt.Println(name, Version(stamped))
		return 0, true
	}
	return 0, false
}

// FlagsDoc is the Markdown flag reference of a binary, generated from its --help text, as
// docs/NAME-flags.md holds it.
func FlagsDoc(name string, fs *flag.FlagSet) string {
	var help bytes.Buffer
	fs.SetOutput(&help)
	defer fs.SetOutput(nil)
	fs.Usage()
	return "# `" + name + "` flags\n\nGenerated from `" + name + " --help` by `make docs`; a test fails when it is stale.\n\n```text\n" + help.String() + "```\n"
}
