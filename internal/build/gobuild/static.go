package gobuild

import (
	"debug/elf"
	"fmt"
)

// CheckStatic refuses a binary that needs a dynamic loader or a shared library: the image has
// neither.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: not an ELF binary: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s asks for a dynamic loader: build it with CGO_ENABLED=0", path)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(libs) > 0 {
		return fmt.Errorf("%s links shared libraries %v: build it with CGO_ENABLED=0", path, libs)
	}
	return nil
}
