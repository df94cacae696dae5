package testcluster

import (
	"archive/zip"
	"context"
	"encoding/json"
	"fmt"
	goversion "go/version"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
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
// moved the line fails the build instead of building unchanged.
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
			return "", fmt.Errorf("%s: %s has %q %d times, not once: check the line a new version changed before building it for the tests (testcluster's patchedModules)", module, file, e.from, n)
		}
		content = strings.Replace(content, e.from, e.to, 1)
	}
	return content, nil
}

// buildableGoLine lowers a module's go directive to the language's first release when it asks
// for a later patch release of the language the machine's Go speaks (Argo Rollouts v1.10.2 asks
// for 1.26.10), so that the one go build of every program runs with the machine's Go and shares
// its standard library; the toolchain line goes. A later language is left as it is, for the go
// command to refuse with its own message.
func buildableGoLine(gomod, localGo string) string {
	lines := strings.Split(gomod, "\n")
	var out []string
	for _, line := range lines {
		trimmed := strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(trimmed, "go "); ok {
			want := "go" + strings.TrimSpace(v)
			if goversion.IsValid(want) && goversion.Lang(want) == goversion.Lang(localGo) {
				line = "go " + strings.TrimPrefix(goversion.Lang(localGo), "go") + ".0"
			}
		}
		if strings.HasPrefix(trimmed, "toolchain ") {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// requiredVersion is the version of module that go.mod requires.
func requiredVersion(gomod, module string) (string, error) {
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(module) + `\s+(v\S+)`).FindStringSubmatch(gomod)
	if m == nil {
		return "", fmt.Errorf("%s/go.mod requires no %s", programsDir, module)
	}
	return m[1], nil
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
	dir, err := downloadModule(ctx, append(os.Environ(), "GOFLAGS=-mod=readonly", "GOTOOLCHAIN=local"), path, version)
	if err != nil {
		return module{}, err
	}
	return module{Path: path, Version: version, Dir: dir}, nil
}

// downloadModule brings module@version into the module cache (from the module proxy, once)
// and returns its folder. It runs outside any module, so no go.mod's go line can refuse it.
func downloadModule(ctx context.Context, env []string, module, version string) (string, error) {
	download := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	download.Env, download.Dir = env, os.TempDir()
	b, err := download.Output()
	var mod struct{ Dir, Error string }
	if jsonErr := json.Unmarshal(b, &mod); jsonErr != nil || mod.Dir == "" {
		return "", fmt.Errorf("download %s@%s: %v %s", module, version, err, mod.Error)
	}
	return mod.Dir, nil
}

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
	local, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	_ = os.RemoveAll(work)
	replaces := []string{string(gomod)}
	for _, m := range patchedModules {
		version, err := requiredVersion(string(gomod), m.path)
		if err != nil {
			return "", err
		}
		archive, err := moduleZip(ctx, m.path, version)
		if err != nil {
			return "", err
		}
		dst := patchedCopy(work, m.path)
		if err := copyPatched(m.path+"@"+version, archive, dst, m.edits, strings.TrimSpace(string(local))); err != nil {
			return "", err
		}
		replaces = append(replaces, fmt.Sprintf("replace %s %s => %s", m.path, version, dst))
	}
	modfile := filepath.Join(work, "programs.mod")
	if err := os.WriteFile(modfile, []byte(strings.Join(replaces, "\n")+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("write the build's go.mod: %w", err)
	}
	if err := os.WriteFile(strings.TrimSuffix(modfile, ".mod")+".sum", gosum, 0o644); err != nil {
		return "", fmt.Errorf("write the build's go.sum: %w", err)
	}
	return modfile, nil
}

// moduleZip downloads module@version (from the module proxy, once) and returns its zip in the
// module cache. The go command fetches the zip, checked against the checksum database, before
// it refuses a module whose go.mod asks for a later Go than the machine's, so the zip is used
// whatever its go line says.
func moduleZip(ctx context.Context, module, version string) (string, error) {
	download := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	download.Env, download.Dir = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOTOOLCHAIN=local"), os.TempDir()
	b, err := download.Output()
	var mod struct{ Zip, Error string }
	if jsonErr := json.Unmarshal(b, &mod); jsonErr != nil || mod.Zip == "" {
		return "", fmt.Errorf("download %s@%s: %v %s", module, version, err, mod.Error)
	}
	if _, err := os.Stat(mod.Zip); err != nil {
		return "", fmt.Errorf("download %s@%s: %w (%s)", module, version, err, mod.Error)
	}
	return mod.Zip, nil
}

// patchedCopy is the folder in work of the patched copy of module.
func patchedCopy(work, module string) string { return filepath.Join(work, filepath.Base(module)) }

// copyPatched unpacks the module zip into dst with its edits made and a go line the machine's Go
// builds.
func copyPatched(module, archive, dst string, edits []sourceEdit, localGo string) error {
	r, err := zip.OpenReader(archive)
	if err != nil {
		return fmt.Errorf("open %s's zip: %w", module, err)
	}
	defer r.Close()
	prefix := module + "/"
	edited := map[string]bool{}
	for _, f := range r.File {
		name, ok := strings.CutPrefix(f.Name, prefix)
		if !ok || !filepath.IsLocal(name) {
			return fmt.Errorf("%s's zip holds %q, outside %s", module, f.Name, prefix)
		}
		if strings.HasSuffix(name, "/") {
			continue
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
			content = buildableGoLine(content, localGo)
		}
		for _, e := range edits {
			if e.file == name {
				edited[name] = true
			}
		}
		path := filepath.Join(dst, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return fmt.Errorf("unpack %s: %w", module, err)
		}
	}
	for _, e := range edits {
		if !edited[e.file] {
			return fmt.Errorf("%s has no %s: check the line a new version moved before building it for the tests (testcluster's patchedModules)", module, e.file)
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
// and go.sum without the replace directives that point at the copies. A plain go mod tidy
// there fails: Argo Rollouts' go.mod asks for a later Go than the machine's.
func TidyPrograms(ctx context.Context, out io.Writer) error {
	root, err := RepoRoot(ctx)
	if err != nil {
		return err
	}
	src := filepath.Join(root, programsDir)
	work, err := os.MkdirTemp("", "configwave-tidy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	modfile, err := writeBuildModule(ctx, src, filepath.Join(work, "module"))
	if err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return err
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	steps := [][]string{{"mod", "tidy", "-modfile=" + modfile}}
	for _, m := range patchedModules {
		version, err := requiredVersion(string(gomod), m.path)
		if err != nil {
			return err
		}
		steps = append(steps, []string{"mod", "edit", "-modfile=" + modfile, "-dropreplace=" + m.path + "@" + version})
	}
	for _, args := range steps {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = src, env, out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go %s in %s: %w", strings.Join(args, " "), programsDir, err)
		}
	}
	for from, to := range map[string]string{modfile: "go.mod", strings.TrimSuffix(modfile, ".mod") + ".sum": "go.sum"} {
		b, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(src, to), b, 0o644); err != nil {
			return fmt.Errorf("write %s/%s: %w", programsDir, to, err)
		}
	}
	return nil
}
