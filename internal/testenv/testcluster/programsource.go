package testcluster

import (
	"archive/zip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	goversion "go/version"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/configwave/configwave/internal/reloader/atomicfile"
)

// Two programs of the programs module are built from a copy of their module with a line
// changed, put in place of the module by a replace directive in a go.mod written for the
// build (go build -modfile): the go command refuses overlays of files in the module cache, and
// a replace in the committed go.mod would point at a folder a clone does not have.
//
// Built in one module graph with the control plane they share its client-go, apimachinery,
// grpc and the rest: a cold make test compiled Kubernetes' libraries three times before
// (1.37, Argo Rollouts' 0.34 and the operator's 0.33).
type patchedModule struct {
	path  string
	edits []sourceEdit
}

// sourceEdit replaces from, which must occur exactly once in file, with to: a new version that
// changed the line fails the build instead of building unpatched.
type sourceEdit struct{ file, from, to string }

var patchedModules = []patchedModule{
	// Its servers listen on every interface, fixed in its source; the tests use loopback only.
	{argoRolloutsModule, []sourceEdit{{"controller/controller.go", `"0.0.0.0:%d"`, `"127.0.0.1:%d"`}}},
	// Built against the control plane's controller-runtime (v0.25, Helm's), whose conversion
	// webhook takes a registry of converters; an empty one converts through the types' hub and
	// spokes, as the operator's own controller-runtime (v0.21) did.
	{prometheusOperatorModule, []sourceEdit{{"pkg/admission/admission.go",
		"conversion.NewWebhookHandler(scheme)", "conversion.NewWebhookHandler(scheme, conversion.NewRegistry())"}}},
}

// applyEdits returns content with each edit made, or an error naming the edit that did not
// match exactly once.
func applyEdits(module, file, content string, edits []sourceEdit) (string, error) {
	for _, e := range edits {
		if e.file != file {
			continue
		}
		if n := strings.Count(content, e.from); n != 1 {
			return "", fmt.Errorf("%s: %s has %q %d times, not once: %s", module, file, e.from, n, checkEdits)
		}
		content = strings.Replace(content, e.from, e.to, 1)
	}
	return content, nil
}

const checkEdits = "check the line a new version changed, and testcluster's patchedModules, before building it for the tests"

// buildableGoLine lowers a module's go directive to the programs module's (ours) when it asks
// for a later patch release of the same language (Argo Rollouts v1.10.2 asks for 1.26.10):
// with GOTOOLCHAIN=local the go command refuses a dependency whose go line is above the main
// module's, and a patch release changes no language. The toolchain line goes. A later language
// is left as it is, for the go command to refuse with its own message. The result does not
// depend on the machine's Go, so every machine resolves the same module graph.
func buildableGoLine(gomod, ours string) string {
	var out []string
	for _, line := range strings.Split(gomod, "\n") {
		trimmed := strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(trimmed, "go "); ok {
			want, have := "go"+strings.TrimSpace(v), "go"+ours
			if goversion.IsValid(want) && goversion.IsValid(have) && goversion.Lang(want) == goversion.Lang(have) && goversion.Compare(want, have) > 0 {
				line = "go " + ours
			}
		}
		if strings.HasPrefix(trimmed, "toolchain ") {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// goLine is the version of a go.mod's go directive.
func goLine(gomod string) string {
	for _, line := range strings.Split(gomod, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// requiredVersion is the version of module that a require directive of go.mod names (alone or
// in a block); replace and exclude directives are not read.
func requiredVersion(gomod, module string) (string, error) {
	inBlock := false
	for _, line := range strings.Split(gomod, "\n") {
		line, _, _ = strings.Cut(line, "//")
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
			continue
		case len(fields) == 2 && fields[0] == "require" && fields[1] == "(":
			inBlock = true
			continue
		case inBlock && fields[0] == ")":
			inBlock = false
			continue
		case fields[0] == "require":
			fields = fields[1:]
		case !inBlock:
			continue
		}
		if len(fields) == 2 && fields[0] == module {
			return fields[1], nil
		}
	}
	return "", fmt.Errorf("%s/go.mod requires no %s: add it with go mod edit -require, then run go run ./hack/devcluster --tidy-programs", programsDir, module)
}

// pinnedModule finds in the module cache (downloading it once) the version of module that the
// programs module pins, so that what the tests read from it (kwok's stages, the CRDs) is the
// version that is built.
func pinnedModule(ctx context.Context, src, path string) (module, error) {
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return module{}, fmt.Errorf("read the programs module: %w", err)
	}
	version, err := requiredVersion(string(gomod), path)
	if err != nil {
		return module{}, err
	}
	dir, err := downloadModule(ctx, path, version)
	if err != nil {
		return module{}, err
	}
	return module{Path: path, Version: version, Dir: dir}, nil
}

// downloaded is what go mod download -json says of one module.
type downloaded struct{ Dir, Zip, Sum, GoModSum, Error string }

// download brings module@version into the module cache (from the module proxy, once). It runs
// outside any module, so that no go.mod or go.sum is read or written, and with the machine's
// Go: a module whose go.mod asks for a later Go is reported with an Error, after the go command
// fetched its zip and checked it against the checksum database.
func download(ctx context.Context, module, version string) (downloaded, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	cmd.Env, cmd.Dir = append(os.Environ(), "GOTOOLCHAIN=local", "GOWORK=off"), os.TempDir()
	b, err := cmd.Output()
	var d downloaded
	if jsonErr := json.Unmarshal(b, &d); jsonErr != nil {
		return downloaded{}, fmt.Errorf("download %s@%s: %w (check GOPROXY and that the module proxy can be reached)", module, version, errors.Join(err, jsonErr))
	}
	return d, nil
}

// downloadModule is the folder of module@version in the module cache, downloaded once.
func downloadModule(ctx context.Context, module, version string) (string, error) {
	d, err := download(ctx, module, version)
	if err != nil {
		return "", err
	}
	if d.Dir == "" {
		return "", fmt.Errorf("download %s@%s: %s (check GOPROXY and that the module proxy can be reached)", module, version, d.Error)
	}
	return d.Dir, nil
}

// moduleZip is the zip of module@version in the module cache, whatever its go line asks for,
// once its hash is the one the programs module's go.sum pins.
func moduleZip(ctx context.Context, gosum, module, version string) (string, error) {
	d, err := download(ctx, module, version)
	if err != nil {
		return "", err
	}
	if d.Zip == "" || d.Sum == "" {
		return "", fmt.Errorf("download %s@%s: %s (check GOPROXY and that the module proxy can be reached)", module, version, d.Error)
	}
	if _, err := os.Stat(d.Zip); err != nil {
		return "", fmt.Errorf("download %s@%s: %w", module, version, err)
	}
	if err := checkPinned(gosum, module, version, d.Sum); err != nil {
		return "", err
	}
	return d.Zip, nil
}

// checkPinned refuses a module whose hash go.sum does not pin, or pins as another.
func checkPinned(gosum, module, version, sum string) error {
	prefix := module + " " + version + " "
	for _, line := range strings.Split(gosum, "\n") {
		if pinned, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			if pinned == sum {
				return nil
			}
			return fmt.Errorf("%s/go.sum pins %s@%s as %s, but the module cache holds %s: a version's content never changes, so find out which is wrong before building it", programsDir, module, version, pinned, sum)
		}
	}
	return fmt.Errorf("%s/go.sum does not pin %s@%s: run go run ./hack/devcluster --tidy-programs", programsDir, module, version)
}

func sumLine(module, version, sum string) string { return module + " " + version + " " + sum }

// writeBuildModule writes into work the patched copies of patchedModules and a go.mod (with
// its go.sum) that is the programs module's with those copies in place of the modules, and
// returns that go.mod's path, for go -modfile in src.
func writeBuildModule(ctx context.Context, src, work string) (string, error) {
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("read the programs module: %w", err)
	}
	gosum, err := os.ReadFile(filepath.Join(src, "go.sum"))
	if err != nil {
		return "", fmt.Errorf("read the programs module's go.sum: %w", err)
	}
	if work, err = filepath.Abs(work); err != nil {
		return "", fmt.Errorf("the build's folder %s: %w", work, err)
	}
	if err := os.RemoveAll(work); err != nil {
		return "", fmt.Errorf("empty %s for the build: %w", work, err)
	}
	build := []string{string(gomod)}
	for _, m := range patchedModules {
		version, err := requiredVersion(string(gomod), m.path)
		if err != nil {
			return "", err
		}
		archive, err := moduleZip(ctx, string(gosum), m.path, version)
		if err != nil {
			return "", err
		}
		dst := patchedCopy(work, m.path)
		if err := copyPatched(m.path+"@"+version, archive, dst, m.edits, goLine(string(gomod))); err != nil {
			return "", err
		}
		build = append(build, replaceLine(m.path, version, dst))
	}
	modfile := filepath.Join(work, "programs.mod")
	if err := os.WriteFile(modfile, []byte(strings.Join(build, "\n")+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("write the build's go.mod: %w", err)
	}
	if err := os.WriteFile(strings.TrimSuffix(modfile, ".mod")+".sum", gosum, 0o644); err != nil {
		return "", fmt.Errorf("write the build's go.sum: %w", err)
	}
	return modfile, nil
}

// replaceLine puts the folder dir in place of module@version; the folder is quoted, as a cache
// folder may have a space in it.
func replaceLine(module, version, dir string) string {
	return fmt.Sprintf("replace %s %s => %s", module, version, strconv.Quote(dir))
}

// patchedCopy is the folder in work of the patched copy of module.
func patchedCopy(work, module string) string {
	return filepath.Join(work, strings.ReplaceAll(module, "/", "_"))
}

// copyPatched unpacks the module zip into dst with its edits made and a go line the programs
// module (whose go line is ours) builds.
func copyPatched(module, archive, dst string, edits []sourceEdit, ours string) error {
	r, err := zip.OpenReader(archive)
	if err != nil {
		return fmt.Errorf("open %s's zip: %w", module, err)
	}
	defer r.Close()
	prefix := module + "/"
	edited := map[string]bool{}
	for _, f := range r.File {
		if strings.HasSuffix(f.Name, "/") {
			continue
		}
		name, ok := strings.CutPrefix(f.Name, prefix)
		if !ok || !filepath.IsLocal(name) {
			return fmt.Errorf("%s's zip holds %q, outside %s: remove it from the module cache (go clean -modcache) and build again", module, f.Name, prefix)
		}
		b, err := readZipFile(f)
		if err != nil {
			return fmt.Errorf("unpack %s: %w", module, err)
		}
		content := string(b)
		if content, err = applyEdits(module, name, content, edits); err != nil {
			return err
		}
		if name == "go.mod" {
			content = buildableGoLine(content, ours)
		}
		for _, e := range edits {
			if e.file == name {
				edited[name] = true
			}
		}
		path := filepath.Join(dst, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("unpack %s: %w", module, err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return fmt.Errorf("unpack %s: %w", module, err)
		}
	}
	for _, e := range edits {
		if !edited[e.file] {
			return fmt.Errorf("%s has no %s: %s", module, e.file, checkEdits)
		}
	}
	return nil
}

func readZipFile(f *zip.File) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// TidyPrograms runs go mod tidy on the programs module, after a version in its go.mod is
// changed, with the patched modules in place as the build has them, and writes back its go.mod
// without the replace directives that point at the copies, and its go.sum with the hashes of the
// patched modules added (tidy leaves out those of replaced modules). A plain go mod tidy there
// fails: Argo Rollouts' go.mod asks for a later Go than ours.
func TidyPrograms(ctx context.Context, out io.Writer) error {
	root, err := RepoRoot(ctx)
	if err != nil {
		return err
	}
	src := filepath.Join(root, programsDir)
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return fmt.Errorf("read the programs module: %w", err)
	}
	work, err := os.MkdirTemp("", "configwave-tidy-")
	if err != nil {
		return fmt.Errorf("make a folder for the tidy: %w", err)
	}
	defer os.RemoveAll(work)
	// moduleZip checks the patched modules' hashes against go.sum, which a new version is not
	// in yet: their hashes are put in first, from what the module proxy serves (and the go
	// command checked against the checksum database).
	var pins []string
	for _, m := range patchedModules {
		version, err := requiredVersion(string(gomod), m.path)
		if err != nil {
			return err
		}
		d, err := download(ctx, m.path, version)
		if err != nil {
			return err
		}
		if d.Sum == "" || d.GoModSum == "" {
			return fmt.Errorf("download %s@%s: %s (check GOPROXY and that the module proxy can be reached)", m.path, version, d.Error)
		}
		pins = append(pins, sumLine(m.path, version, d.Sum), sumLine(m.path, version+"/go.mod", d.GoModSum))
	}
	gosum, err := os.ReadFile(filepath.Join(src, "go.sum"))
	if err != nil {
		return fmt.Errorf("read the programs module's go.sum: %w", err)
	}
	pinned := filepath.Join(work, "pinned")
	if err := os.MkdirAll(pinned, 0o755); err != nil {
		return fmt.Errorf("make a folder for the tidy: %w", err)
	}
	for name, b := range map[string][]byte{"go.mod": gomod, "go.sum": withLines(gosum, pins)} {
		if err := os.WriteFile(filepath.Join(pinned, name), b, 0o644); err != nil {
			return fmt.Errorf("write the tidy's %s: %w", name, err)
		}
	}
	modfile, err := writeBuildModule(ctx, pinned, filepath.Join(work, "module"))
	if err != nil {
		return err
	}
	env := append(os.Environ(), "GOTOOLCHAIN=local", "GOWORK=off")
	steps := [][]string{{"mod", "tidy", "-modfile=" + modfile}}
	for _, m := range patchedModules {
		version, _ := requiredVersion(string(gomod), m.path)
		steps = append(steps, []string{"mod", "edit", "-modfile=" + modfile, "-dropreplace=" + m.path + "@" + version})
	}
	for _, args := range steps {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = src, env, out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go %s in %s: %w", strings.Join(args, " "), programsDir, err)
		}
	}
	tidied, err := os.ReadFile(modfile)
	if err != nil {
		return fmt.Errorf("read the tidied go.mod: %w", err)
	}
	tidiedSum, err := os.ReadFile(strings.TrimSuffix(modfile, ".mod") + ".sum")
	if err != nil {
		return fmt.Errorf("read the tidied go.sum: %w", err)
	}
	// go.sum first: a go.mod that names versions its go.sum lacks fails every build, while the
	// other way round the next tidy mends it.
	for _, f := range []struct {
		name string
		data []byte
	}{{"go.sum", withLines(tidiedSum, pins)}, {"go.mod", tidied}} {
		if _, err := atomicfile.Write(filepath.Join(src, f.name), f.data, 0o644); err != nil {
			return fmt.Errorf("write %s/%s: %w", programsDir, f.name, err)
		}
	}
	return nil
}

// withLines is a go.sum with lines added where missing, each before the first line that sorts
// after it, so that the order go writes stays.
func withLines(gosum []byte, lines []string) []byte {
	all := strings.Split(strings.TrimSpace(string(gosum)), "\n")
	for _, l := range lines {
		if slices.Contains(all, l) {
			continue
		}
		i := slices.IndexFunc(all, func(have string) bool { return have > l })
		if i < 0 {
			i = len(all)
		}
		all = slices.Insert(all, i, l)
	}
	return []byte(strings.Join(all, "\n") + "\n")
}
