package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
	"sigs.k8s.io/yaml"
)

// printStructured writes v as -o json or -o yaml, or returns false for the table.
func printStructured(w io.Writer, output string, v any) (bool, error) {
	switch output {
	case "", "table", "wide":
		return false, nil
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return true, err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return true, err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return true, err
		}
		_, err = w.Write(b)
		return true, err
	}
	return true, fmt.Errorf("--output %q: use table, json or yaml", output)
}

// colours are used only on a terminal, and never when NO_COLOR is set (no-color.org).
type colours struct{ on bool }

func coloursFor(w io.Writer) colours {
	f, ok := w.(*os.File)
	return colours{on: ok && term.IsTerminal(int(f.Fd())) && os.Getenv("NO_COLOR") == ""}
}

func (c colours) paint(code, s string) string {
	if !c.on {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// outcome colours an outcome as Argo Rollouts' plugin does its statuses: green done, red failed,
// yellow in between.
func (c colours) outcome(s string) string {
	switch {
	case s == "rolled out" || s == "latest Job":
		return c.paint("32", s)
	case len(s) >= 6 && s[:6] == "failed", len(s) >= 7 && s[:7] == "aborted":
		return c.paint("31", s)
	case s == "replaced":
		return s
	}
	return c.paint("33", s)
}
