package confighash

import (
	"fmt"
	"strings"
	"testing"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/podrefs"
)

// 10 ConfigMaps of 10 keys of 1 KiB: a typical workload's config, 100 KiB in all.
func benchUses() (podrefs.Uses, GetFunc) {
	uses := podrefs.Uses{}
	var objs []any
	for i := range 10 {
		data := map[string]string{}
		for k := range 10 {
			data[fmt.Sprintf("key-%d", k)] = strings.Repeat(string(rune('a'+k)), 1024)
		}
		name := fmt.Sprintf("cm-%d", i)
		objs = append(objs, cmObj(name, data, nil))
		uses[cmRef(name)] = &podrefs.Use{AllKeys: true, Required: true}
	}
	return uses, objects(objs...)
}

func BenchmarkWaveHash100KiB(b *testing.B) {
	uses, get := benchUses()
	b.SetBytes(100 << 10)
	for b.Loop() {
		if _, err := WaveHash(HashWave, uses, get); err != nil {
			b.Fatal(err)
		}
	}
}

// The inputs record is what wave computes on every event, from the digested cache.
func BenchmarkInputsOf10Objects(b *testing.B) {
	uses, get := benchUses()
	cache := map[configref.Ref]map[string]string{}
	for r := range uses {
		o, _ := get(r)
		d, _ := Digest(o)
		cache[r] = KeyDigests(d)
	}
	digests := func(r configref.Ref) (map[string]string, bool) { d, ok := cache[r]; return d, ok }
	for b.Loop() {
		InputsOf("ns", uses, digests)
	}
}

func BenchmarkDigestTransform16KiB(b *testing.B) {
	cm := cmObj("a", map[string]string{"config.yaml": strings.Repeat("x", 16<<10)}, nil)
	b.SetBytes(16 << 10)
	for b.Loop() {
		if _, err := Digest(cm); err != nil {
			b.Fatal(err)
		}
	}
}
