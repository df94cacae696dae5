// Package gobuild builds configwave's binaries as a release ships them: static, without
// symbols, paths trimmed, the version stamped and the commit recorded. `make release`, `make
// image` and the tests that run the image all build through it, so they share Go's build
// cache and test what ships.
//
//	err := gobuild.Binary(ctx, gobuild.Target{Root: ".", OS: "linux", Arch: "amd64", Version: "v1.2.3"}, "wave", "dist/wave")
package gobuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Target is what a binary is built for.
type Target struct {
	Root     string // the repository
	OS, Arch string
	Version  string // stamped into main.version
}

// FileOnlyTag is the build tag that leaves the API source out of cmd/reloader: the file-only
// build, for the launches that read mounted folders.
const FileOnlyTag = "configwave_fileonly"

// FileOnlyReloader is the name of the reloader's file-only build.
const FileOnlyReloader = "reloader-fileonly"

// Binary builds the program NAME into dest: ./cmd/NAME, or for FileOnlyReloader ./cmd/reloader
// with FileOnlyTag.
func Binary(ctx context.Context, t Target, name, dest string) error {
	pkg, tags := "./cmd/"+name, ""
	if name == FileOnlyReloader {
		pkg, tags = "./cmd/reloader", FileOnlyTag
	}
	// -buildvcs=auto: from a git checkout the commit goes into the binary, and from there into
	// the SBOM, whatever GOFLAGS says; from an archive without .git, nothing does.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=auto", "-tags", tags, "-ldflags", "-s -w -X main.version="+t.Version, "-o", dest, pkg)
	cmd.Dir = t.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.OS, "GOARCH="+t.Arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s for %s/%s: %w\n%s", name, t.OS, t.Arch, err, out)
	}
	return nil
}

// Revision is the commit checked out at root, with "-dirty" when the tree has changes; "" outside
// a git checkout.
func Revision(ctx context.Context, root string) string {
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "HEAD")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(out))
	status := exec.CommandContext(ctx, "git", "status", "--porcelain")
	status.Dir = root
	if out, err := status.Output(); err == nil && len(strings.TrimSpace(string(out))) > 0 {
		rev += "-dirty"
	}
	return rev
}

// CommitTime dates what is built from the commit at root, so that building it twice gives the
// same bytes; SOURCE_DATE_EPOCH wins, and outside git it is the Unix epoch.
func CommitTime(ctx context.Context, root string) time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		var sec int64
		if _, err := fmt.Sscan(s, &sec); err == nil {
			return time.Unix(sec, 0).UTC()
		}
	}
	cmd := exec.CommandContext(ctx, "git", "log", "-1", "--format=%ct")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		var sec int64
		if _, err := fmt.Sscan(strings.TrimSpace(string(out)), &sec); err == nil {
			return time.Unix(sec, 0).UTC()
		}
	}
	return time.Unix(0, 0).UTC()
}
