package configref

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// Docs are the files, from the module root, that hold the generated tables:
// each binary's table sits in one of them between BeginMarker(binary) and
// EndMarker; the rest of the files is left alone. The proxy's table is in
// the README, the others in the configuration page.
var Docs = []string{"README.md", "docs/configuration.md"}

// EndMarker closes a generated table.
const EndMarker = "<!-- end of generated table -->"

// BeginMarker opens the generated table of a binary.
func BeginMarker(binary string) string {
	return "<!-- " + binary + " configuration: generated from its config struct by `go generate ./deployments/configref`; edit the struct's desc tags -->"
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

// UpdateTables replaces, in doc, the generated table of every binary whose
// begin marker doc holds, and returns the names of those binaries. A begin
// marker without its end marker is an error.
func (r Reference) UpdateTables(doc []byte) ([]byte, []string, error) {
	out := doc
	var found []string
	for _, b := range r.Binaries {
		begin := []byte(BeginMarker(b.Name) + "\n")
		i := bytes.Index(out, begin)
		if i < 0 {
			continue
		}
		start := i + len(begin)
		j := bytes.Index(out[start:], []byte(EndMarker))
		if j < 0 {
			return nil, nil, fmt.Errorf("no end marker after the %s table", b.Name)
		}
		out = append(append(append([]byte{}, out[:start]...), b.Table()...), out[start+j:]...)
		found = append(found, b.Name)
	}
	return out, found, nil
}

// CheckPlacement says which binary's table is in none of the docs or in
// more than one (found: the binaries found in each doc).
func (r Reference) CheckPlacement(found [][]string) error {
	count := map[string]int{}
	for _, names := range found {
		for _, n := range names {
			count[n]++
		}
	}
	for _, b := range r.Binaries {
		if count[b.Name] != 1 {
			return fmt.Errorf("the %s table is in %d of %v, not one", b.Name, count[b.Name], Docs)
		}
	}
	return nil
}
