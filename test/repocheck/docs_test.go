package repocheck

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docs are the user's and the engineers' documents whose citations are
// checked.
func docs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, files...)
}

var (
	// testName is a test, benchmark or fuzz function cited by name.
	testName = regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*\b`)
	// code is an inline code span.
	code = regexp.MustCompile("`([^`\n]+)`")
	// link is a Markdown link's target.
	link = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// makeTarget is the target of a command: a code span's or a code
	// block's line that starts with make.
	makeTarget = regexp.MustCompile(`^\s*(?:sudo )?make ([a-z][a-z0-9-]*)\b`)
	// repoPath is a path that starts with one of the repository's
	// top-level entries.
	repoPath = regexp.MustCompile(`^(?:\./)?(?:api|cmd|deployments|docs|internal|pkg|scripts|test|\.ci)/[A-Za-z0-9_./-]*$|^(?:Dockerfile|Makefile|README\.md|CHANGELOG\.md|go\.mod)$`)
)

// TestDocsCiteWhatExists: every test named in the docs (TestX, BenchmarkX)
// is a function of a test file in the repository, every repository path
// they cite (in a code span or a relative link) exists, and every
// `make X` is a target of the Makefile. A rename that forgets the docs
// fails here.
func TestDocsCiteWhatExists(t *testing.T) {
	tests := testFuncs(t)
	targets := makeTargets(t)
	for _, doc := range docs(t) {
		rel, _ := filepath.Rel(root, doc)
		fenced := false
		eachLine(t, doc, func(n int, line string) {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
				return
			}
			for _, name := range testName.FindAllString(line, -1) {
				if !tests[name] {
					t.Errorf("%s:%d cites %s: no such test function", rel, n, name)
				}
			}
			commands := []string{}
			if fenced {
				commands = append(commands, line)
			}
			spans := code.FindAllStringSubmatch(line, -1)
			for _, m := range spans {
				commands = append(commands, m[1])
			}
			for _, c := range commands {
				if m := makeTarget.FindStringSubmatch(c); m != nil && !targets[m[1]] {
					t.Errorf("%s:%d cites make %s: no such target in the Makefile", rel, n, m[1])
				}
			}
			for _, m := range spans {
				for _, p := range citedPaths(m[1]) {
					if !exists(filepath.Join(root, p)) {
						t.Errorf("%s:%d cites %s: no such path", rel, n, p)
					}
				}
			}
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target, _, _ := strings.Cut(m[1], "#")
				if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				if !exists(filepath.Join(filepath.Dir(doc), target)) {
					t.Errorf("%s:%d links to %s: no such file", rel, n, m[1])
				}
			}
		})
	}
}

// citedPaths are the repository paths in a code span: each word shaped
// like one, without a trailing line number, "/..." or punctuation, its
// {a,b} alternatives expanded; placeholders (<name>) and wildcards are left
// out.
func citedPaths(span string) []string {
	var out []string
	for _, w := range strings.Fields(span) {
		w = strings.TrimRight(w, ".,;:)")
		w = strings.TrimSuffix(w, "/...")
		if i := strings.Index(w, ".go:"); i >= 0 {
			w = w[:i+3]
		}
		if strings.ContainsAny(w, "<>*$") {
			continue
		}
		for _, p := range expand(w) {
			if repoPath.MatchString(p) {
				out = append(out, strings.TrimSuffix(p, "/"))
			}
		}
	}
	return out
}

// expand expands one {a,b,...} group of a path.
func expand(p string) []string {
	open, end := strings.Index(p, "{"), strings.Index(p, "}")
	if open < 0 || end < open {
		return []string{p}
	}
	var out []string
	for _, alt := range strings.Split(p[open+1:end], ",") {
		out = append(out, expand(p[:open]+alt+p[end+1:])...)
	}
	return out
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// eachLine calls fn with every line of a file, numbered from 1.
func eachLine(t *testing.T, path string, fn func(int, string)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; s.Scan(); n++ {
		fn(n, s.Text())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

// testFuncs are the names of the test, benchmark and fuzz functions of
// every test file in the repository (its other modules' included).
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil {
				names[fn.Name.Name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// makeTargets are the Makefile's targets.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	rule := regexp.MustCompile(`^([A-Za-z0-9_ %-]+):([^=]|$)`)
	targets := map[string]bool{}
	eachLine(t, filepath.Join(root, "Makefile"), func(_ int, line string) {
		if m := rule.FindStringSubmatch(line); m != nil {
			for _, name := range strings.Fields(m[1]) {
				targets[name] = true
			}
		}
	})
	if len(targets) == 0 {
		t.Fatal("no target in the Makefile")
	}
	return targets
}

func TestCitedPaths(t *testing.T) {
	for span, want := range map[string][]string{
		"pkg/proxy/{hairpin,serviceroutes}.go": {"pkg/proxy/hairpin.go", "pkg/proxy/serviceroutes.go"},
		"pkg/lab/...":                          {"pkg/lab"},
		"traffic_test.go:195":                  nil,
		"pkg/proxy/sync.go:12, then Makefile.": {"pkg/proxy/sync.go", "Makefile"},
		"pkg/<name>d":                          nil,
		"k8s.io/kubernetes/pkg/proxy":          nil,
		"NSM_SERVICES_FILE":                    nil,
	} {
		got := citedPaths(span)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("citedPaths(%q) = %q, want %q", span, got, want)
		}
	}
}
