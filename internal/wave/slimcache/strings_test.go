package slimcache

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

func TestStringsAreCopiesInOneBlock(t *testing.T) {
	tests := []struct {
		name string
		in   []string
	}{
		{"none", nil},
		{"one", []string{"scale/app-1"}},
		{"empty ones among others", []string{"", "a", "", "bc"}},
		{"repeated", []string{"scale", "app-1", "scale", "app-2", "scale"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b StringPacker
			for _, s := range tt.in {
				b.Add(s)
			}
			out := b.Strings()
			assert.Len(t, out, len(tt.in))
			for i := range tt.in {
				assert.Equal(t, tt.in[i], out[i])
			}
			// Every non-empty copy lies in one block: from the first copy's start, within the
			// distinct strings' total length.
			var first uintptr
			total := 0
			seen := map[string]bool{}
			for _, s := range tt.in {
				if !seen[s] {
					seen[s] = true
					total += len(s)
				}
			}
			for _, s := range out {
				if s == "" {
					continue
				}
				p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
				if first == 0 {
					first = p
				}
				assert.GreaterOrEqual(t, p, first)
				assert.LessOrEqual(t, p+uintptr(len(s)), first+uintptr(total))
			}
		})
	}
}

func TestEqualStringsShareOneCopy(t *testing.T) {
	var b StringPacker
	b.Add(strings.Repeat("x", 3))
	b.Add("xxx")
	out := b.Strings()
	assert.Same(t, unsafe.StringData(out[0]), unsafe.StringData(out[1]))
}
