package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// GoTool is the go command of the toolchain running the tests: `go test`
// puts its GOROOT/bin first on PATH; the GOROOT of the test binary is the
// fallback.
func GoTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go") //nolint:staticcheck // the toolchain that built this test
}

// ModuleRoot returns the directory of the go.mod of the module the current
// directory belongs to (a test runs in its package's directory).
func ModuleRoot() (string, error) {
	out, err := exec.Command(GoTool(), "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside a module")
	}
	return filepath.Dir(mod), nil
}

// BuildBinary builds the main package pkg into dir and returns the path of
// the binary. pkg is an import path or a path relative to the module root
// ("./cmd/nsp"); flags go to `go build` before the package, for example
// "-ldflags", "-X main.version=test". It suits a TestMain, which has no
// testing.TB.
func BuildBinary(dir, pkg string, flags ...string) (string, error) {
	bins, err := build(dir, []string{pkg}, flags)
	if err != nil {
		return "", err
	}
	return bins[path.Base(pkg)], nil
}

// BuildBinaries builds the main packages pkgs (import paths or paths
// relative to the module root) with one `go build` into a temporary
// directory of t and returns the path of each binary by its name, the last
// element of its package path ("ipam" for "./cmd/ipam").
// A failed build fails t with the compiler's output.
func BuildBinaries(t testing.TB, pkgs ...string) map[string]string {
	t.Helper()
	bins, err := build(t.TempDir(), pkgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return bins
}

// BuildTags are the build tags of every binary the project ships
// (Makefile's NORACE, the Dockerfile): grpcnotrace keeps gRPC from linking
// golang.org/x/net/trace, whose templates would make the linker keep every
// exported method of every type used as an interface value.
const BuildTags = "grpcnotrace"

// build runs `go build -trimpath -tags BuildTags flags -o dir/ pkgs` in the
// module root with cgo off: static binaries as `make build` and the images
// build them (a dynamically linked proxy maps libc too: 1.3 MiB more
// resident file pages in TestProxyMemory), from the packages `make build`
// and `make lint` compiled already (the same flags: Makefile's NORACE).
// Each binary is named after the last element of its package path.
func build(dir string, pkgs, flags []string) (map[string]string, error) {
	if len(pkgs) == 0 {
		return nil, errors.New("build: no package")
	}
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	bins := make(map[string]string, len(pkgs))
	names := make(map[string]string, len(pkgs))
	for _, p := range pkgs {
		name := path.Base(p)
		if name == "." || name == "/" {
			return nil, fmt.Errorf("build %q: name the package by its path", p)
		}
		if other, dup := names[name]; dup {
			return nil, fmt.Errorf("build: %q and %q would both be %s", other, p, name)
		}
		names[name] = p
		bins[name] = filepath.Join(dir, name)
	}
	args := append(append([]string{"build", "-trimpath", "-tags=" + BuildTags}, flags...), "-o", dir+string(filepath.Separator))
	cmd := exec.Command(GoTool(), append(args, pkgs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, out)
	}
	return bins, nil
}
