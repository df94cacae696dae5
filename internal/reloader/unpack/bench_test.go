package unpack_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/configwave/configwave/internal/reloader/unpack"
)

// 100 files of ~10 KiB (1 MiB in all), each iteration a new version of every file.
func fileSet(version int) map[string]unpack.File {
	files := map[string]unpack.File{}
	for i := range 100 {
		data := make([]byte, 10<<10)
		for j := range data {
			data[j] = byte('a' + (i+j+version)%26)
		}
		files[fmt.Sprintf("dir%d/file%d.conf", i%10, i)] = unpack.File{Data: data, Mode: 0o644}
	}
	return files
}

func BenchmarkWrite100Files1MiB(b *testing.B) {
	w := unpack.New(b.TempDir())
	sets := []map[string]unpack.File{fileSet(0), fileSet(1)}
	b.SetBytes(100 * 10 << 10)
	i := 0
	for b.Loop() {
		if _, err := w.Write(sets[i%2]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// The floor: the same files written in place, with no atomicity at all.
func BenchmarkFloorWriteFilesInPlace1MiB(b *testing.B) {
	root := b.TempDir()
	sets := []map[string]unpack.File{fileSet(0), fileSet(1)}
	b.SetBytes(100 * 10 << 10)
	i := 0
	for b.Loop() {
		for p, f := range sets[i%2] {
			name := filepath.Join(root, p)
			_ = os.MkdirAll(filepath.Dir(name), 0o755)
			fh, err := os.Create(name)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = fh.Write(f.Data)
			fh.Close()
		}
		i++
	}
}
