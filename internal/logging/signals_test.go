package logging_test

import (
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/internal/logging"
	"github.com/causeway-net/causeway/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFollowLevelSignals sends the signals to the test process itself:
// SIGUSR2 turns TRACE on, SIGUSR1 puts the configured level back, and each
// change is logged.
func TestFollowLevelSignals(t *testing.T) {
	var out testutil.SyncBuffer
	log, lv := logging.New(&out, "proxy", slog.LevelInfo)
	stop := logging.FollowLevelSignals(lv, slog.LevelInfo, log)
	defer stop()

	send := func(sig syscall.Signal, want slog.Level, line string) {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for lv.Level() != want || !strings.Contains(out.String(), line) {
			if time.Now().After(deadline) {
				t.Fatalf("after %s: level %v, want %v; log %q", sig, lv.Level(), want, out.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	send(syscall.SIGUSR2, logging.LevelTrace, `"msg":"log level changed","component":"proxy","level":"TRACE"`)
	if !log.Enabled(t.Context(), logging.LevelTrace) {
		t.Fatal("TRACE lines are not written after SIGUSR2")
	}
	send(syscall.SIGUSR1, slog.LevelInfo, `"level":"INFO","signal":"user defined signal 1"`)
	if log.Enabled(t.Context(), slog.LevelDebug) {
		t.Fatal("DEBUG lines are still written after SIGUSR1")
	}
}
