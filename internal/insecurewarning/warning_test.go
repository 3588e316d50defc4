package insecurewarning

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) { b.mu.Lock(); defer b.mu.Unlock(); return b.b.Write(p) }
func (b *buffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.b.String(), s)
}

func TestWarnRepeats(t *testing.T) {
	var out buffer
	logger := slog.New(slog.NewTextHandler(&out, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Warn(ctx, logger, "IPAM_INSECURE", "server", 10*time.Millisecond) }()
	require.Eventually(t, func() bool { return out.count("setting=IPAM_INSECURE") >= 3 }, time.Minute, 5*time.Millisecond,
		"the warning at start and at each interval")
	cancel()
	<-done
}

func TestStartWarnsAtOnceAndStops(t *testing.T) {
	var out buffer
	stop := Start(slog.New(slog.NewTextHandler(&out, nil)), "NSP_INSECURE", "server")
	require.Eventually(t, func() bool { return out.count("gRPC without SPIFFE mTLS") == 1 }, time.Minute, 5*time.Millisecond)
	stop()
}
