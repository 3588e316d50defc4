// Package svidlog owns the log line of each X.509 SVID a component receives
// from the SPIFFE workload API: the first one, and each renewal (a new
// serial), with its SPIFFE ID and expiry, so that an operator sees the
// rotations SPIRE makes and when the one in use ends.
package svidlog

import (
	"context"
	"log/slog"
	"sync"

	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// Source is the part of *workloadapi.X509Source that Start reads.
type Source interface {
	x509svid.Source
	// Updated is sent on whenever the source has new SVIDs or bundles.
	Updated() <-chan struct{}
}

// Start logs src's SVID now and each new one after, until stop is called;
// stop waits for the goroutine it started.
func Start(src Source, logger *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		follow(ctx, src, logger)
	}()
	return func() { cancel(); wg.Wait() }
}

// follow logs each SVID whose serial differs from the last one logged.
func follow(ctx context.Context, src Source, logger *slog.Logger) {
	last := ""
	for {
		if svid, err := src.GetX509SVID(); err == nil && len(svid.Certificates) > 0 {
			leaf := svid.Certificates[0]
			if serial := leaf.SerialNumber.String(); serial != last {
				msg := "SPIFFE SVID renewed"
				if last == "" {
					msg = "SPIFFE SVID"
				}
				logger.Info(msg, "spiffe_id", svid.ID.String(), "serial", serial, "not_after", leaf.NotAfter)
				last = serial
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-src.Updated():
		}
	}
}
