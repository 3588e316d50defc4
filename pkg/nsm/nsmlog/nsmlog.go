// Package nsmlog bridges the NSM SDK's logger interface into log/slog, so
// that the SDK's log lines come out as the same structured JSON as
// Causeway's own, at levels the binary's log level filters.
package nsmlog

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	nsmlog "github.com/networkservicemesh/sdk/pkg/tools/log"

	"github.com/causeway-net/causeway/internal/logging"
)

// Logger implements the SDK's log.Logger on top of a *slog.Logger.
type Logger struct {
	l *slog.Logger
}

var _ nsmlog.Logger = (*Logger)(nil)

// New wraps l.
func New(l *slog.Logger) *Logger { return &Logger{l: l.With("source", "nsm")} }

// Install makes l the SDK's global logger, and turns the SDK's tracing on
// only when l logs at TRACE level.
func Install(l *slog.Logger) {
	nsmlog.SetGlobalLogger(New(l))
	nsmlog.EnableTracing(l.Enabled(context.Background(), logging.LevelTrace))
}

// WithContext returns ctx carrying l as the SDK's logger. The global one
// (Install) is not enough for the SDK's registry chains: their trace
// elements replace a context's logger that is the global one with a
// plain-text logrus logger of their own, so that the retries of a registry
// call in an NSM outage came out as plain text, five lines a second.
func WithContext(ctx context.Context, l *slog.Logger) context.Context {
	return nsmlog.WithLog(ctx, New(l))
}

func (g *Logger) log(level slog.Level, msg string) {
	if level > logging.LevelTrace && perTry(msg) {
		level = logging.LevelTrace
	}
	g.l.Log(context.Background(), level, msg)
}

// perTry tells whether msg is one of the SDK's lines for every try of a
// registry call: its retry elements log each failed try at ERROR, and its
// client URL element each call at DEBUG, about ten lines a second for as
// long as NSM is away. They are demoted to TRACE: the caller reports the
// outage once (the full mesh's "registry watch broke"), and the end of the
// retries shows as its success.
func perTry(msg string) bool {
	return strings.HasPrefix(msg, "try attempt has failed") || strings.HasPrefix(msg, "passed clientURL")
}

func (g *Logger) Info(v ...any)                 { g.log(slog.LevelInfo, fmt.Sprint(v...)) }
func (g *Logger) Infof(format string, v ...any) { g.log(slog.LevelInfo, fmt.Sprintf(format, v...)) }
func (g *Logger) Warn(v ...any)                 { g.log(slog.LevelWarn, fmt.Sprint(v...)) }
func (g *Logger) Warnf(format string, v ...any) { g.log(slog.LevelWarn, fmt.Sprintf(format, v...)) }
func (g *Logger) Error(v ...any)                { g.log(slog.LevelError, fmt.Sprint(v...)) }
func (g *Logger) Errorf(format string, v ...any) {
	g.log(slog.LevelError, fmt.Sprintf(format, v...))
}
func (g *Logger) Debug(v ...any)                 { g.log(slog.LevelDebug, fmt.Sprint(v...)) }
func (g *Logger) Debugf(format string, v ...any) { g.log(slog.LevelDebug, fmt.Sprintf(format, v...)) }
func (g *Logger) Trace(v ...any)                 { g.log(logging.LevelTrace, fmt.Sprint(v...)) }
func (g *Logger) Tracef(format string, v ...any) {
	g.log(logging.LevelTrace, fmt.Sprintf(format, v...))
}

// Fatal logs at error level and exits, as the SDK's contract requires.
func (g *Logger) Fatal(v ...any) {
	g.log(slog.LevelError, fmt.Sprint(v...))
	os.Exit(1)
}

// Fatalf logs at error level and exits.
func (g *Logger) Fatalf(format string, v ...any) {
	g.log(slog.LevelError, fmt.Sprintf(format, v...))
	os.Exit(1)
}

// Object logs one key/value pair at trace level.
func (g *Logger) Object(k, v any) {
	g.l.Log(context.Background(), logging.LevelTrace, "object", fmt.Sprint(k), v)
}

// WithField returns a logger that adds key=value to every line.
func (g *Logger) WithField(key, value any) nsmlog.Logger {
	return &Logger{l: g.l.With(fmt.Sprint(key), value)}
}
