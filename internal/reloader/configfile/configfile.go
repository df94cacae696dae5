// Package configfile turns a config file into what the app reads, as prometheus-config-reloader
// does with --config-file and --config-envsubst-file: gunzipped when it is gzip, and with every
// $(NAME) replaced by the environment variable NAME.
//
//	out, unset, err := configfile.File(in, os.LookupEnv)
//	err = configfile.WriteAtomic("/etc/prometheus/config_out/prometheus.env.yaml", out, 0o644)
//
// Only $(NAME) with NAME of [A-Za-z0-9_] is expanded, the Kubernetes form: $NAME and ${NAME}
// are left alone, because a Prometheus config uses them itself (relabelling's ${1}). A
// variable that is not set is left as written and reported, so that one missing variable
// does not stop the whole config.
package configfile

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"regexp"

	"github.com/configwave/configwave/internal/reloader/atomicfile"
)

// MaxSize bounds a decompressed config: a small gzip can unpack to gigabytes.
const MaxSize = 64 << 20

var gzipMagic = []byte{0x1f, 0x8b, 0x08}

var envRef = regexp.MustCompile(`\$\(([A-Za-z0-9_]+)\)`)

// File decompresses in when it is gzip and expands $(NAME) from lookup. unset lists the
// names referenced but not set, in order of first use; they are left as written.
func File(in []byte, lookup func(string) (string, bool)) (out []byte, unset []string, err error) {
	if bytes.HasPrefix(in, gzipMagic) {
		if in, err = gunzip(in); err != nil {
			return nil, nil, err
		}
	}
	out, unset = Expand(in, lookup)
	return out, unset, nil
}

func gunzip(in []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(in))
	if err != nil {
		return nil, fmt.Errorf("the file starts as gzip but is not: %w", err)
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	if len(out) > MaxSize {
		return nil, fmt.Errorf("gunzip: it unpacks to more than %d MiB", MaxSize>>20)
	}
	return out, nil
}

// Expand replaces every $(NAME) whose variable is set.
func Expand(in []byte, lookup func(string) (string, bool)) (out []byte, unset []string) {
	seen := map[string]bool{}
	out = envRef.ReplaceAllFunc(in, func(ref []byte) []byte {
		name := string(ref[2 : len(ref)-1])
		if v, ok := lookup(name); ok {
			return []byte(v)
		}
		if !seen[name] {
			seen[name] = true
			unset = append(unset, name)
		}
		return ref
	})
	return out, unset
}

// WriteAtomic replaces path with data so that a reader, or the next start after a crash, sees
// the old file or the new one, never a part (atomicfile.Write). Nothing is written when path
// already holds data.
func WriteAtomic(path string, data []byte, mode os.FileMode) (changed bool, err error) {
	return atomicfile.Write(path, data, mode)
}
