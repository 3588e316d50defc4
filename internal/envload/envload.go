// Package envload reads a service's configuration struct from environment
// variables (envconfig tags: names, defaults, split words) and, unlike a
// single envconfig.Process, reports every variable whose value cannot be
// parsed, each named with its value and the type it must have; and renders
// such a struct in a log line (LogValue).
package envload

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"unicode"

	"github.com/kelseyhightower/envconfig"
)

// Process fills spec, a pointer to a struct, from the environment variables
// of prefix. The error lists every value that does not parse, one per line.
func Process(prefix string, spec any) error {
	v := reflect.ValueOf(spec)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("envload: %T is not a pointer to a struct", spec)
	}
	if err := envconfig.Process(prefix, spec); err == nil {
		return nil
	}
	var errs []error
	t := v.Elem().Type()
	for i := range t.NumField() {
		if err := processField(prefix, t.Field(i)); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 { // not a parse error of one field: report it as is
		return envconfig.Process(prefix, spec)
	}
	return errors.Join(errs...)
}

// processField reads one field alone, in a struct of its own, so that its
// error does not hide the others'.
func processField(prefix string, f reflect.StructField) error {
	if !f.IsExported() {
		return nil
	}
	one := reflect.New(reflect.StructOf([]reflect.StructField{{Name: f.Name, Type: f.Type, Tag: f.Tag}}))
	err := envconfig.Process(prefix, one.Interface())
	var pe *envconfig.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s=%q: not %s", pe.KeyName, pe.Value, kind(f.Type, pe.Err))
	}
	return err
}

// kind describes what a value of type t looks like.
func kind(t reflect.Type, err error) string {
	switch {
	case t.PkgPath() == "time" && t.Name() == "Duration":
		return "a duration (such as 500ms, 30s, 5m, 24h)"
	case t.Kind() == reflect.Bool:
		return "a boolean (true or false)"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64,
		t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		if strings.Contains(err.Error(), "out of range") {
			return "an integer in range of " + t.Kind().String()
		}
		return "an integer"
	default:
		return fmt.Sprintf("a valid %s (%v)", t, err)
	}
}

// LogValue renders a configuration struct (or a pointer to one) in a log
// line: one attribute per exported field, keyed by the field's name in
// lower camel case, durations and URLs as text.
func LogValue(spec any) slog.Value {
	v := reflect.Indirect(reflect.ValueOf(spec))
	if v.Kind() != reflect.Struct {
		return slog.AnyValue(spec)
	}
	attrs := make([]slog.Attr, 0, v.NumField())
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.IsExported() {
			attrs = append(attrs, slog.Any(lowerCamel(f.Name), text(v.Field(i))))
		}
	}
	return slog.GroupValue(attrs...)
}

// Map is LogValue as a map, for JSON output (-debug).
func Map(spec any) map[string]any {
	out := map[string]any{}
	for _, a := range LogValue(spec).Group() {
		out[a.Key] = a.Value.Any()
	}
	return out
}

// text is a field's value as logged: a Stringer's text, else the value.
func text(v reflect.Value) any {
	if v.CanAddr() {
		if s, ok := v.Addr().Interface().(fmt.Stringer); ok {
			return s.String()
		}
	}
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return s.String()
	}
	return v.Interface()
}

// lowerCamel turns a Go field name into a log key: MTU → mtu, IPAMService
// → ipamService, DialTimeout → dialTimeout.
func lowerCamel(name string) string {
	r := []rune(name)
	n := 0
	for n < len(r) && unicode.IsUpper(r[n]) {
		n++
	}
	if n > 1 && n < len(r) {
		n-- // the last capital of an initialism starts the next word
	}
	for i := range n {
		r[i] = unicode.ToLower(r[i])
	}
	return string(r)
}
