package daemon

import (
	"os"
	"runtime/debug"
)

// gcPercent is the garbage collector's target percentage a service runs
// with: the GOGC that the Go runtime already applied if the environment
// sets one (a number, or "off"), else def (none when def is 0 or less).
// It reports whether def was applied.
func gcPercent(def int, getenv func(string) string) (int, bool) {
	if def <= 0 || getenv("GOGC") != "" {
		return 0, false
	}
	return def, true
}

// applyGCPercent sets def as the collector's target unless GOGC is set,
// and returns the target in force (debug.SetGCPercent's -1 is "off").
func applyGCPercent(def int) (percent int, fromDefault bool) {
	if p, ok := gcPercent(def, os.Getenv); ok {
		debug.SetGCPercent(p)
		return p, true
	}
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p, false
}
