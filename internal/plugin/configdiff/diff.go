// Package configdiff tells what differs between the config two revisions' pods read: a
// unified diff of each changed key of a ConfigMap, and of a Secret only which keys were added,
// removed or changed, with their sizes, never a value (nor anything derived from one, such as
// a hash, which would let a reader test a guess).
package configdiff

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pmezard/go-difflib/difflib"
)

// Content is one ConfigMap's or Secret's content as one revision's pods read it.
type Content struct {
	// What names the source as kubectl does: "configmap/app".
	What string
	// Where says which copy: "revision 3, snapshot app-0123456789" or "revision 3, live".
	Where  string
	Secret bool
	// Data is a ConfigMap's data and binaryData, or a Secret's data.
	Data map[string][]byte
	// Binary marks a ConfigMap's binaryData keys.
	Binary map[string]bool
	// Type is a Secret's type.
	Type string
	// Missing: the revision does not use the source, or its copy is gone.
	Missing bool
	// Unkept: the revision keeps no copy; Data is the live object's, today.
	Unkept bool
}

// Write writes to w what differs from a to b (the same source in two revisions) and whether
// anything does.
func Write(w io.Writer, a, b Content) (changed bool, err error) {
	ew := &errWriter{w: w}
	switch {
	case a.Missing && b.Missing:
		return false, nil
	case a.Missing:
		ew.printf("%s: added in %s (keys %s)\n", b.What, b.Where, keyList(b))
		return true, ew.err
	case b.Missing:
		ew.printf("%s: removed in %s (was in %s)\n", a.What, b.Where, a.Where)
		return true, ew.err
	}
	if a.Secret && b.Secret && a.Type != b.Type {
		ew.printf("%s: type %s in %s, %s in %s\n", b.What, Clean(a.Type), a.Where, Clean(b.Type), b.Where)
		changed = true
	}
	keys := slices.Sorted(maps.Keys(a.Data))
	for k := range b.Data {
		if _, ok := a.Data[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		av, inA := a.Data[k]
		bv, inB := b.Data[k]
		if inA && inB && string(av) == string(bv) && a.Binary[k] == b.Binary[k] {
			continue
		}
		changed = true
		key := b.What + " key " + strconv.Quote(k)
		switch {
		case a.Secret || b.Secret || a.Binary[k] || b.Binary[k] || !utf8.Valid(av) || !utf8.Valid(bv):
			ew.printf("%s\n", opaque(key, av, bv, inA, inB))
		default:
			text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
				A: lines(Clean(string(av))), B: lines(Clean(string(bv))),
				FromFile: fmt.Sprintf("%s/%s (%s)", a.What, Clean(k), a.Where), ToFile: fmt.Sprintf("%s/%s (%s)", b.What, Clean(k), b.Where),
				Context: 3,
			})
			if err != nil {
				return changed, fmt.Errorf("diff %s: %w", key, err)
			}
			if !strings.HasSuffix(text, "\n") {
				text += "\n"
			}
			ew.printf("%s", text)
		}
	}
	return changed, ew.err
}

// lines splits s after each line break, the last line given one where it has none (difflib's
// SplitLines adds an empty line after a final break, which would show as a change).
func lines(s string) []string {
	out := strings.SplitAfter(s, "\n")
	if out[len(out)-1] == "" {
		out = out[:len(out)-1]
	} else {
		out[len(out)-1] += "\n"
	}
	return out
}

// opaque says how a key whose value is not shown changed: sizes only.
func opaque(key string, a, b []byte, inA, inB bool) string {
	switch {
	case !inA:
		return fmt.Sprintf("%s: added (%d bytes)", key, len(b))
	case !inB:
		return fmt.Sprintf("%s: removed (was %d bytes)", key, len(a))
	}
	return fmt.Sprintf("%s: changed (%d bytes, now %d bytes)", key, len(a), len(b))
}

func keyList(c Content) string {
	keys := slices.Sorted(maps.Keys(c.Data))
	for i, k := range keys {
		keys[i] = strconv.Quote(k)
	}
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ")
}

// Clean shows control characters as escapes: a ConfigMap's content, or a key, must not move
// the user's terminal cursor, hide a line or reorder what a reviewer reads.
func Clean(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, // bidirectional overrides reorder what is shown
			r == 0x200e || r == 0x200f || r == 0x061c, r == 0x2028 || r == 0x2029: // marks and separators of lines
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
