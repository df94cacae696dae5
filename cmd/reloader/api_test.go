//go:build !configwave_fileonly

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/configwave/configwave/internal/build/gobuild"
)

// The full build hands a folder launch over to the file-only build beside it, and nothing else.
func TestFileOnlyBuildFor(t *testing.T) {
	assert.Equal(t, gobuild.FileOnlyReloader, fileOnlyBuildName, "the name the image gives the file-only build")
	image := t.TempDir()
	for name, mode := range map[string]os.FileMode{"reloader": 0o755, fileOnlyBuildName: 0o755} {
		assert.NoError(t, os.WriteFile(filepath.Join(image, name), nil, mode))
	}
	alone := t.TempDir()
	notExecutable := t.TempDir()
	assert.NoError(t, os.WriteFile(filepath.Join(notExecutable, fileOnlyBuildName), nil, 0o644))
	asDir := t.TempDir()
	assert.NoError(t, os.Mkdir(filepath.Join(asDir, fileOnlyBuildName), 0o755))
	folders := &config{folders: []string{"/etc/config"}}
	api := &config{}
	for _, tc := range []struct {
		name string
		cfg  *config
		dir  string
		want string
	}{
		{"folders, in the image", folders, image, filepath.Join(image, fileOnlyBuildName)},
		{"the API, in the image", api, image, ""},
		{"folders, no file-only build beside", folders, alone, ""},
		{"folders, beside but not executable", folders, notExecutable, ""},
		{"folders, beside but a folder", folders, asDir, ""},
		{"folders, serving a web config file", &config{folders: []string{"/etc/config"}, listen: ":8080", peer: peerSettings{webConfigFile: "/etc/web.yml"}}, image, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := fileOnlyBuildFor(tc.cfg, filepath.Join(tc.dir, "reloader"), os.Stat)
			assert.Equal(t, tc.want != "", ok)
			assert.Equal(t, tc.want, got)
		})
	}
}
