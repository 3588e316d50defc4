package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{"trace": LevelTrace, "DEBUG": slog.LevelDebug, "Info": slog.LevelInfo,
		"warning": slog.LevelWarn, "WARN": slog.LevelWarn, "error": slog.LevelError, "FATAL": slog.LevelError} {
		got, err := ParseLevel(in)
		if err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseLevel("loud"); err == nil {
		t.Error("ParseLevel(loud) succeeded")
	}
}

func TestNewFiltersAndNamesTrace(t *testing.T) {
	var buf bytes.Buffer
	log, lv := New(&buf, "ipam", slog.LevelInfo)
	log.Debug("hidden")
	if buf.Len() != 0 {
		t.Fatalf("debug line written at info level: %s", buf.String())
	}
	lv.Set(LevelTrace)
	log.Log(t.Context(), LevelTrace, "shown", "k", 1)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not JSON: %v: %s", err, buf.String())
	}
	if line["level"] != "TRACE" || line["component"] != "ipam" || line["msg"] != "shown" || line["k"] != float64(1) {
		t.Fatalf("unexpected line %v", line)
	}
}

// Durations are written as text, in groups too.
func TestNewWritesDurationsAsText(t *testing.T) {
	var buf bytes.Buffer
	log, _ := New(&buf, "proxy", slog.LevelInfo)
	log.Info("retrying", "after", 1500*time.Millisecond, slog.Group("g", "wait", 2*time.Minute))
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not JSON: %v: %s", err, buf.String())
	}
	if line["after"] != "1.5s" || line["g"].(map[string]any)["wait"] != "2m0s" {
		t.Fatalf("durations not as text: %s", buf.String())
	}
}
