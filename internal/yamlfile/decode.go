package yamlfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"
)

// DecodeStrict decodes one YAML document into v, rejecting unknown fields,
// an empty document (emptyHint says what to write instead) and more than
// one document, and returns the lines of the entries of its top-level
// lists, for error messages.
func DecodeStrict(data []byte, v any, emptyHint string) (Lines, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("the file is empty (%s)", emptyHint)
		}
		return nil, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("the file holds more than one YAML document")
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(err)
	}
	return entryLines(&root), nil
}

// Lines maps a top-level key to the line of each entry of its list.
type Lines map[string][]int

func entryLines(root *yaml.Node) Lines {
	out := Lines{}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return out
	}
	m := root.Content[0]
	if m.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		seq := m.Content[i+1]
		if seq.Kind != yaml.SequenceNode {
			continue
		}
		for _, item := range seq.Content {
			out[m.Content[i].Value] = append(out[m.Content[i].Value], item.Line)
		}
	}
	return out
}

// Where names entry i of the list kind for error messages: kind[i], its
// name when it has one, and its line when known.
func (l Lines) Where(kind string, i int, name string) string {
	s := fmt.Sprintf("%s[%d]", kind, i)
	if name != "" {
		s += fmt.Sprintf(" %q", name)
	}
	if i < len(l[kind]) {
		s += fmt.Sprintf(" (line %d)", l[kind][i])
	}
	return s
}

// InvalidError lists every semantic problem found in a configuration.
type InvalidError struct {
	Problems []error
}

func (e *InvalidError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid configuration (%d problem", len(e.Problems))
	if len(e.Problems) > 1 {
		b.WriteString("s")
	}
	b.WriteString("): ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap exposes the individual problems to errors.Is and errors.As.
func (e *InvalidError) Unwrap() []error { return e.Problems }
