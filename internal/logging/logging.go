// Package logging builds the structured JSON loggers of Causeway's binaries
// and understands Meridio's level names (TRACE, DEBUG, INFO, WARN/WARNING,
// ERROR, FATAL, PANIC).
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// LevelTrace is below slog's Debug; it turns on the NSM SDK's tracing.
const LevelTrace = slog.LevelDebug - 4

// ParseLevel maps a level name, case-insensitively, to a slog level.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "TRACE":
		return LevelTrace, nil
	case "DEBUG":
		return slog.LevelDebug, nil
	case "INFO", "":
		return slog.LevelInfo, nil
	case "WARN", "WARNING":
		return slog.LevelWarn, nil
	case "ERROR", "FATAL", "PANIC":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q (want TRACE, DEBUG, INFO, WARN or ERROR)", s)
}

// New returns a JSON logger writing to w at the given level, with a
// "component" attribute on every line. The returned LevelVar changes the
// level at run time.
func New(w io.Writer, component string, level slog.Level) (*slog.Logger, *slog.LevelVar) {
	lv := new(slog.LevelVar)
	lv.Set(level)
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: lv,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.LevelKey {
				if l, ok := a.Value.Any().(slog.Level); ok && l <= LevelTrace {
					a.Value = slog.StringValue("TRACE")
				}
			}
			return a
		},
	})
	return slog.New(h).With("component", component), lv
}
