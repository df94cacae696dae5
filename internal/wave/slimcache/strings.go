// Package slimcache keeps what wave's informer caches hold for the life of the process small:
// the Identity its cache types embed in place of a whole ObjectMeta, and StringPacker, which
// copies many short strings into one allocation. Strings decoded from an informer's initial
// list lie among that list's garbage, each holding a span of the heap; their copies, made once
// the list is in, lie together.
//
//	var b slimcache.StringPacker
//	for _, s := range names { b.Add(s) }
//	copies := b.Strings() // copies[i] == names[i], all substrings of one string
package slimcache

import "strings"

// StringPacker gathers the strings to copy. Equal strings share one copy. The zero value is ready.
type StringPacker struct {
	order []int          // for each Add, its string's place in unique
	seen  map[string]int // string -> place in unique
	// unique are the distinct strings, in their first Add's order.
	unique []string
	size   int
}

// Add notes s; Strings returns its copy at the place of this call (0 for the first).
func (b *StringPacker) Add(s string) {
	if b.seen == nil {
		b.seen = map[string]int{}
	}
	i, ok := b.seen[s]
	if !ok {
		i = len(b.unique)
		b.seen[s] = i
		b.unique = append(b.unique, s)
		b.size += len(s)
	}
	b.order = append(b.order, i)
}

// Strings returns a copy of every string added, in the order of the calls to Add, each a
// substring of one new string.
func (b *StringPacker) Strings() []string {
	var sb strings.Builder
	sb.Grow(b.size)
	for _, s := range b.unique {
		sb.WriteString(s)
	}
	block := sb.String()
	copies := make([]string, len(b.unique))
	off := 0
	for i, s := range b.unique {
		copies[i] = block[off : off+len(s)]
		off += len(s)
	}
	out := make([]string, len(b.order))
	for i, u := range b.order {
		out[i] = copies[u]
	}
	return out
}
