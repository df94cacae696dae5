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
	emptyWeb, configuredWeb := filepath.Join(t.TempDir(), "empty.yml"), filepath.Join(t.TempDir(), "web.yml")
	assert.NoError(t, os.WriteFile(emptyWeb, []byte(" \n"), 0o600))
	assert.NoError(t, os.WriteFile(configuredWeb, []byte("http_server_config:\n  http2: false\n"), 0o600))
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
		{"folders, serving a web config file", &config{folders: []string{"/etc/config"}, listen: ":8080", peer: peerSettings{webConfigFile: configuredWeb}}, image, ""},
		{"folders, a web config file that cannot be read", &config{folders: []string{"/etc/config"}, listen: ":8080", peer: peerSettings{webConfigFile: "/nowhere/web.yml"}}, image, ""},
		{"folders, an empty web config file (plain HTTP)", &config{folders: []string{"/etc/config"}, listen: ":8080", peer: peerSettings{webConfigFile: emptyWeb}}, image, filepath.Join(image, fileOnlyBuildName)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := fileOnlyBuildFor(tc.cfg, filepath.Join(tc.dir, "reloader"), os.Stat)
			assert.Equal(t, tc.want != "", ok)
			assert.Equal(t, tc.want, got)
		})
	}
}
