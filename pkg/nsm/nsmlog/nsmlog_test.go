package nsmlog

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/causeway-net/causeway/internal/logging"
)

func TestBridgeLevelsAndFields(t *testing.T) {
	var buf bytes.Buffer
	base, _ := logging.New(&buf, "proxy", slog.LevelDebug)
	l := New(base)
	l.WithField("conn", "c1").Infof("request %d", 7)
	l.Trace("not shown at debug level")
	l.Errorf("boom: %s", "x")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %d: %q", len(lines), buf.String())
	}
	var first, second map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	if first["msg"] != "request 7" || first["conn"] != "c1" || first["level"] != "INFO" || first["source"] != "nsm" {
		t.Errorf("first line %v", first)
	}
	if second["msg"] != "boom: x" || second["level"] != "ERROR" {
		t.Errorf("second line %v", second)
	}
}
