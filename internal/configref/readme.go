package configref

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// README is the file whose configuration tables the reference owns, from
// the module root. Each table sits between BeginMarker(binary) and
// EndMarker; the rest of the file is left alone.
const README = "README.md"

// EndMarker closes a generated table.
const EndMarker = "<!-- end of generated table -->"

// BeginMarker opens the generated table of a binary.
func BeginMarker(binary string) string {
	return "<!-- " + binary + " configuration: generated from its config struct by `go generate ./internal/configref`; edit the struct's desc tags -->"
}

// codeSpan matches a 'quoted' span in a description: struct tags cannot
// hold backquotes, so descriptions quote code with single quotes, which the
// table renders as code. An apostrophe inside a word is left alone.
var codeSpan = regexp.MustCompile(`(^|[\s(])'([^'\s][^']*)'`)

// Table renders the Markdown table of one binary's variables.
func (b Binary) Table() string {
	var sb strings.Builder
	sb.WriteString("| variable | default | meaning |\n|---|---|---|\n")
	for _, v := range b.Vars {
		name := "`" + v.Name + "`"
		if v.New {
			name += " (new)"
		}
		def := v.Default
		if def == "" {
			def = `""`
		}
		meaning := codeSpan.ReplaceAllString(v.Description, "$1`$2`")
		fmt.Fprintf(&sb, "| %s | `%s` | %s |\n", name, def, strings.ReplaceAll(meaning, "|", `\|`))
	}
	return sb.String()
}

// UpdateREADME replaces the generated table of every binary in readme. A
// binary whose markers are missing is an error.
func (r Reference) UpdateREADME(readme []byte) ([]byte, error) {
	out := readme
	for _, b := range r.Binaries {
		begin := []byte(BeginMarker(b.Name) + "\n")
		i := bytes.Index(out, begin)
		if i < 0 {
			return nil, fmt.Errorf("%s: no %q", README, begin)
		}
		start := i + len(begin)
		j := bytes.Index(out[start:], []byte(EndMarker))
		if j < 0 {
			return nil, fmt.Errorf("%s: no end marker after the %s table", README, b.Name)
		}
		out = append(append(append([]byte{}, out[:start]...), b.Table()...), out[start+j:]...)
	}
	return out, nil
}
