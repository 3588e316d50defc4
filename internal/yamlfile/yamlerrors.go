package yamlfile

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// yamlError rewrites a decode error of go-yaml for an operator: one problem
// per line, what the value should be instead of a Go type ("cannot
// unmarshal !!str `abc` into int" becomes "`abc` is not a number"), and no
// Go type names. Other errors (syntax) are only stripped of the "yaml: "
// prefix.
func yamlError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	problems := make([]error, 0, len(te.Errors))
	for _, e := range te.Errors {
		problems = append(problems, errors.New(rewriteTypeProblem(e)))
	}
	return errors.Join(problems...)
}

var (
	unmarshalRe = regexp.MustCompile("^(line \\d+): cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")
	unknownRe   = regexp.MustCompile(`^(line \d+): field (\S+) not found in type \S+$`)
)

// rewriteTypeProblem rewrites one of go-yaml's "line N: …" problems.
func rewriteTypeProblem(p string) string {
	if m := unknownRe.FindStringSubmatch(p); m != nil {
		return fmt.Sprintf("%s: field %s not found: not a key of this entry (mistyped?)", m[1], m[2])
	}
	m := unmarshalRe.FindStringSubmatch(p)
	if m == nil {
		return p
	}
	line, tag, value, goType := m[1], m[2], m[3], m[4]
	got := "a " + yamlKind(tag)
	if value != "" {
		got = fmt.Sprintf("%q", value)
	}
	return fmt.Sprintf("%s: %s is not %s", line, got, expected(goType))
}

// yamlKind names a YAML tag for an operator.
func yamlKind(tag string) string {
	switch tag {
	case "seq":
		return "list"
	case "map":
		return "mapping"
	case "str":
		return "text"
	case "int", "float":
		return "number"
	default:
		return tag
	}
}

// expected describes the value a Go type takes.
func expected(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["):
		return "a mapping"
	case goType == "bool":
		return "a boolean (true or false)"
	case goType == "string":
		return "text"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint"):
		return "a whole number in range"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "time.Duration":
		return "a duration (such as 500ms, 30s, 5m)"
	case strings.Contains(goType, "."):
		return "a mapping (key: value)"
	default:
		return "a " + goType
	}
}
