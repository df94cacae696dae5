package reload

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/reloader/source"
	"github.com/configwave/configwave/internal/reloader/unpack"
)

func TestMountedFilesKeepEachFoldersPath(t *testing.T) {
	files, left, err := Mounted{}.Files([]source.Object{
		{Ref: configref.Ref{Kind: source.Folder, Name: "/etc/a"}, Data: map[string][]byte{"x.yml": []byte("1"), "sub/y": []byte("2")}},
		{Ref: configref.Ref{Kind: source.Folder, Name: "/etc/b"}, Data: map[string][]byte{"x.yml": []byte("3")}},
	})
	require.NoError(t, err)
	assert.Empty(t, left)
	assert.Equal(t, map[string]unpack.File{
		"/etc/a/x.yml": {Data: []byte("1")}, "/etc/a/sub/y": {Data: []byte("2")}, "/etc/b/x.yml": {Data: []byte("3")},
	}, files)
}

func TestInPlace(t *testing.T) {
	set := func(v string) map[string]unpack.File { return map[string]unpack.File{"/etc/a/x": {Data: []byte(v)}} }
	reject := errors.New("rejected")
	tests := []struct {
		name        string
		accepted    string // content accepted before
		offer       string
		check       error
		onDiskAfter string // what the folder holds once the check ran
		wantChanged bool
		wantErr     error
		wantNow     string // accepted after
	}{
		{name: "a first set goes live", offer: "v1", onDiskAfter: "v1", wantChanged: true, wantNow: "v1"},
		{name: "the same set again is no change", accepted: "v1", offer: "v1", onDiskAfter: "v1", wantNow: "v1"},
		{name: "a new set goes live", accepted: "v1", offer: "v2", onDiskAfter: "v2", wantChanged: true, wantNow: "v2"},
		{name: "a set the check rejects does not", accepted: "v1", offer: "bad", check: reject, onDiskAfter: "bad", wantErr: reject, wantNow: "v1"},
		{name: "a set swapped out while it was checked does not", accepted: "v1", offer: "v2", onDiskAfter: "v3", wantNow: "v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &InPlace{Dir: "/etc/a", Reread: func() (map[string]unpack.File, error) { return set(tt.onDiskAfter), nil }}
			if tt.accepted != "" {
				p.accepted = Hash(set(tt.accepted))
			}
			var checkedIn string
			changed, err := p.WriteChecked(set(tt.offer), func(dir string) error { checkedIn = dir; return tt.check })
			assert.Equal(t, tt.wantChanged, changed)
			assert.ErrorIs(t, err, tt.wantErr)
			assert.Equal(t, Hash(set(tt.wantNow)), p.accepted)
			if tt.accepted != tt.offer {
				assert.Equal(t, "/etc/a", checkedIn, "the check runs against the folder the app reads")
			}
			assert.False(t, p.HasLiveSet())
		})
	}
}
