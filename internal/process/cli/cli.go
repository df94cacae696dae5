// Package cli is what both binaries do before their own work: parse flags alike, answer
// --help and --version, cap the log verbosity, and exit 2 with one line on bad flags.
package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	flag "github.com/spf13/pflag"

	"github.com/configwave/configwave/internal/process/logflags"
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
	logflags.Apply(fs) // first: the verbosity --log-level sets is capped too, and JSON from the first line
	logflags.Cap(fs)
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
