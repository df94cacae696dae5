package reload

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/render"
	"github.com/configwave/configwave/internal/unpack"
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
}

// WriteChecked implements Target.
func (r *Rendered) WriteChecked(files map[string]unpack.File, check func(dir string) error) (bool, error) {
	in, ok := files[r.Input]
	if !ok {
		return false, fmt.Errorf("--config-file %s: no such file in its folder; check the path and the volume that holds it", r.Input)
	}
	if r.Output != "" {
		lookup := r.Lookup
		if lookup == nil {
			lookup = os.LookupEnv
		}
		out, unset, err := render.File(in.Data, lookup)
		if err != nil {
			return false, fmt.Errorf("--config-file %s: %w", r.Input, err)
		}
		if r.OnRender != nil {
			r.OnRender(len(unset))
		}
		if len(unset) > 0 {
			klog.InfoS("warning: the config refers to environment variables that are not set; left as written", "file", r.Input, "variables", strings.Join(unset, ","))
		}
		if _, err := render.WriteAtomic(r.Output, out, 0o644); err != nil {
			return false, fmt.Errorf("--config-envsubst-file: %w", err)
		}
	}
	return r.InPlace.WriteChecked(files, check)
}
