package reload

import (
	"path"

	"k8s.io/klog/v2"

	"github.com/configwave/configwave/internal/reloader/source"
	"github.com/configwave/configwave/internal/reloader/unpack"
)

// Mounted is the file set of folders the app reads where they are (source.Folders): every file
// as it is, under its folder's path. Nothing is laid out, so no key can clash or be refused.
type Mounted struct{}

// Files implements FileSet.
func (Mounted) Files(objects []source.Object) (map[string]unpack.File, []LeftOut, error) {
	files := map[string]unpack.File{}
	for _, o := range objects {
		for k, v := range o.Data {
			files[path.Join(o.Name, k)] = unpack.File{Data: v}
		}
	}
	return files, nil, nil
}

// InPlace is the Target of folders the app already reads where they are: kubelet, a CSI driver
// or cert-manager swapped the files in, and nothing is written. A set "goes live" when the
// reloader accepts it: it differs from the last one accepted, and the check, which runs against
// the folder itself ($CONFIG_DIR), passed while the folder still held that set.
type InPlace struct {
	// Dir is where the check runs: the first folder.
	Dir string
	// Reread returns the set on disk now, to see that the check judged the set it was given.
	Reread   func() (map[string]unpack.File, error)
	accepted string
}

// WriteChecked implements Target.
func (p *InPlace) WriteChecked(files map[string]unpack.File, check func(dir string) error) (bool, error) {
	h := Hash(files)
	if h == p.accepted {
		return false, nil
	}
	if check != nil {
		if err := check(p.Dir); err != nil {
			return false, err
		}
		if p.Reread != nil {
			if now, err := p.Reread(); err != nil || Hash(now) != h {
				// The folder changed while it was checked. The source has seen that change too
				// and signals it, so the next pass checks what is there now.
				klog.V(2).InfoS("the folder changed while the check ran; checking it again", "folder", p.Dir)
				return false, nil
			}
		}
	}
	p.accepted = h
	return true, nil
}

// HasLiveSet implements Target. What the app was told before a restart is not known here, so a
// restarted reloader does not tell the app of the set it finds, as configmap-reload does not.
func (p *InPlace) HasLiveSet() bool { return false }
