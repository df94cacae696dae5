package reload

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/reloader/configfile"
	"github.com/configwave/configwave/internal/reloader/source"
	"github.com/configwave/configwave/internal/reloader/unpack"
)

// Rendered is the Target of prometheus-config-reloader's --config-file and
// --config-envsubst-file: the input file of the set is gunzipped and has its $(NAME)
// references expanded, and the result replaces Output atomically before the set is accepted
// in place (InPlace) and the app is told.
type Rendered struct {
	InPlace
	// Input is the config file's path as the file set names it (Mounted: its folder's path,
	// then its name).
	Input string
	// Output is where the app reads the rendered config; empty: the input is read as it is.
	Output string
	Lookup func(string) (string, bool) // default os.LookupEnv
	// OnRender, when set, hears of each render: how many referenced variables were not set.
	OnRender func(unset int)
	// Content gives the input's bytes. Nil: the set holds them. The folder source's sets hold
	// digests (source.FileDigest), so it reads the file and checks it against its digest
	// (source.ReadVerified); a file changed since is a change under way, rendered once read.
	Content func(path string, f unpack.File) ([]byte, error)
}

// WriteChecked implements Target. The rendered config is checked before it replaces Output:
// the check runs with $CONFIG_DIR a folder that holds it under Output's name, beside Output,
// removed after; a rejected config is never live. Without Output, the config file's own folder
// is checked, where it is.
func (r *Rendered) WriteChecked(files map[string]unpack.File, check func(dir string) error) (bool, error) {
	if Hash(files) == r.accepted {
		return false, nil
	}
	in, ok := files[r.Input]
	if !ok {
		return false, fmt.Errorf("--config-file %s: no such file in its folder; check the path and the volume that holds it", r.Input)
	}
	var out []byte
	if r.Output != "" {
		lookup := r.Lookup
		if lookup == nil {
			lookup = os.LookupEnv
		}
		data := in.Data
		if r.Content != nil {
			var err error
			if data, err = r.Content(r.Input, in); errors.Is(err, source.ErrChangedSinceRead) {
				klog.V(2).InfoS("the config file changed while it was read; rendering it once the change is seen", "file", r.Input)
				return false, nil
			} else if err != nil {
				return false, fmt.Errorf("--config-file %s: %w", r.Input, err)
			}
		}
		rendered, unset, err := configfile.File(data, lookup)
		if err != nil {
			return false, fmt.Errorf("--config-file %s: %w", r.Input, err)
		}
		if r.OnRender != nil {
			r.OnRender(len(unset))
		}
		if len(unset) > 0 {
			klog.InfoS("warning: the config refers to environment variables that are not set; left as written", "file", r.Input, "variables", strings.Join(unset, ","))
		}
		out = rendered
	}
	if check != nil {
		if err := r.check(out, check); err != nil {
			return false, err
		}
	}
	if r.Output != "" {
		if _, err := configfile.WriteAtomic(r.Output, out, 0o644); err != nil {
			return false, fmt.Errorf("--config-envsubst-file: %w", err)
		}
	}
	return r.InPlace.WriteChecked(files, nil) // checked above: accepted as it is
}

// check runs the check on the config the app is to read: the rendered out, staged under
// Output's name in a folder of its own beside Output, or the input where it is.
func (r *Rendered) check(out []byte, check func(dir string) error) error {
	if r.Output == "" {
		return check(filepath.Dir(r.Input))
	}
	stage, err := os.MkdirTemp(filepath.Dir(r.Output), ".configwave-check-")
	if err != nil {
		return fmt.Errorf("--config-envsubst-file: make a folder to check the rendered config in: %w", err)
	}
	defer os.RemoveAll(stage)
	if err := os.WriteFile(filepath.Join(stage, filepath.Base(r.Output)), out, 0o644); err != nil {
		return fmt.Errorf("--config-envsubst-file: write the rendered config to check: %w", err)
	}
	return check(stage)
}
