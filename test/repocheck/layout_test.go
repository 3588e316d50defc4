package repocheck

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/causeway-net/causeway"

// root is the module's root, two levels above this package.
var root = filepath.Join("..", "..")

// TestInternalImportsNothingAbove: a package under internal/ is a ground
// floor; an import of pkg/ or cmd/ (its tests' included) would run an arrow
// back up the tree. An assembly that needs them lives with what it serves.
func TestInternalImportsNothingAbove(t *testing.T) {
	n := 0
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		n++
		for _, imp := range imports(t, path) {
			for _, above := range []string{module + "/pkg/", module + "/cmd/"} {
				if strings.HasPrefix(imp, above) {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s imports %s: internal/ imports nothing of pkg/ or cmd/; move the assembly to the component or the test tree it serves", rel, imp)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no Go file under internal/")
	}
}

// imports lists the import paths of one Go file.
func imports(t *testing.T, path string) []string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range f.Imports {
		p, err := strconv.Unquote(s.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}
