package binarypages

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func smapsEntry(header string, anon, swap int) string {
	return header + "\nSize:                100 kB\nRss:                  40 kB\nAnonymous:           " + strconv.Itoa(anon) +
		" kB\nSwap:                " + strconv.Itoa(swap) + " kB\nVmFlags: rd ex mr mw me\n"
}

func TestReadOnlyRegions(t *testing.T) {
	exe := File{Dev: "fe:00", Inode: 10011217, Path: "/reloader"}
	tests := []struct {
		name  string
		smaps string
		want  []Region
	}{
		{"code and read-only data of the program", smapsEntry("00400000-00896000 r-xp 00000000 fe:00 10011217 /reloader", 0, 0) +
			smapsEntry("00896000-00d8a000 r--p 00496000 fe:00 10011217 /reloader", 0, 0),
			[]Region{{0x400000, 0x896000, "r-xp"}, {0x896000, 0xd8a000, "r--p"}}},
		{"the data segment is written", smapsEntry("00d8a000-00df1000 rw-p 0098a000 fe:00 10011217 /reloader", 0, 0), nil},
		{"read-only with pages of its own (relocations)", smapsEntry("00896000-00d8a000 r--p 00496000 fe:00 10011217 /reloader", 4, 0), nil},
		{"read-only with pages swapped out", smapsEntry("00896000-00d8a000 r--p 00496000 fe:00 10011217 /reloader", 0, 8), nil},
		{"shared mapping", smapsEntry("00400000-00896000 r-xs 00000000 fe:00 10011217 /reloader", 0, 0), nil},
		{"another file", smapsEntry("7f00000000-7f00001000 r--p 00000000 fe:00 42 /lib/libc.so.6", 0, 0), nil},
		{"anonymous", smapsEntry("c000000000-c000400000 rw-p 00000000 00:00 0", 0, 0), nil},
		{"no access (a guard)", smapsEntry("00400000-00401000 ---p 00000000 fe:00 10011217 /reloader", 0, 0), nil},
		{"the overlay's path, the layer's device and inode", smapsEntry("00400000-00896000 r-xp 00000000 00:2a 77 /reloader", 0, 0),
			[]Region{{0x400000, 0x896000, "r-xp"}}},
		{"another path of the same name's start", smapsEntry("00400000-00896000 r-xp 00000000 00:2a 77 /reloader-fileonly", 0, 0), nil},
		{"same inode on another device", smapsEntry("00400000-00896000 r-xp 00000000 fe:01 10011217 /other/reloader", 0, 0), nil},
		{"counts not shown", "00400000-00896000 r-xp 00000000 fe:00 10011217 /reloader\nSize: 100 kB\n", nil},
		{"garbled range", smapsEntry("zz-00401000 r--p 00000000 fe:00 10011217 /reloader", 0, 0), nil},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadOnlyRegions(strings.NewReader(tt.smaps), exe)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Release in this very process (the test binary): the file pages it maps fall, and the process
// runs on.
func TestReleaseDropsThisProgramsPages(t *testing.T) {
	before := rssFileKiB(t)
	n, err := Release()
	require.NoError(t, err)
	assert.Positive(t, n, "some mappings of the test binary were dropped")
	after := rssFileKiB(t)
	assert.Less(t, after, before, "file pages resident: %d KiB before, %d KiB after", before, after)
	for range 3 { // and it runs on, touching its code and tables again
		_, err = Release()
		require.NoError(t, err)
	}
}

func rssFileKiB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}
