// Package insecurewarning owns the warning of a component that runs gRPC without
// SPIFFE mutual TLS because its configuration asked for it: logged at start
// and again every Interval while it runs, so that it stays in sight of
// whoever reads the recent log.
package insecurewarning

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Interval is the period of the repeated warning.
const Interval = time.Hour

// Warn logs the warning that what runs in plain text because setting asked
// for it, now and then every interval until ctx is done.
func Warn(ctx context.Context, logger *slog.Logger, setting, what string, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		logger.Warn("gRPC without SPIFFE mTLS: any peer can connect and read or change state; use only for local testing",
			"setting", setting, "plaintext", what)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Start runs Warn with Interval in a goroutine and returns the function that
// stops it and waits for it.
func Start(logger *slog.Logger, setting, what string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		Warn(ctx, logger, setting, what, Interval)
	}()
	return func() { cancel(); wg.Wait() }
}
