// Package logging builds the structured JSON loggers of Causeway's binaries,
// understands Meridio's level names (TRACE, DEBUG, INFO, WARN/WARNING,
// ERROR, FATAL, PANIC) and switches the level at run time on SIGUSR1 and
// SIGUSR2.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
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
			// A duration reads as an operator writes it ("1.5s"), not
			// as JSON's nanoseconds.
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		},
	})
	return slog.New(h).With("component", component), lv
}

// FollowLevelSignals switches lv on signals until the returned stop is
// called: SIGUSR2 turns on TRACE, SIGUSR1 puts back the configured level.
// Each change is logged on log. stop ends the signal delivery and waits for
// the goroutine that follows them; it may be called more than once.
func FollowLevelSignals(lv *slog.LevelVar, configured slog.Level, log *slog.Logger) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case s := <-sigs:
				if s == syscall.SIGUSR2 {
					lv.Set(LevelTrace)
				} else {
					lv.Set(configured)
				}
				log.Info("log level changed", "level", levelName(lv.Level()), "signal", s.String())
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			wg.Wait()
		})
	}
}

// levelName names a level as the log lines do (TRACE below DEBUG).
func levelName(l slog.Level) string {
	if l <= LevelTrace {
		return "TRACE"
	}
	return l.String()
}
