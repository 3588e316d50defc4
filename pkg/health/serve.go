package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// DefaultSocketPath is where the proxy serves its health service, as Meridio's
// (unix:///tmp/health.sock).
const DefaultSocketPath = "/tmp/health.sock"

// ListenUnix listens on a unix socket at path (a "unix://" prefix is
// accepted), creating its directory and removing a stale socket left by an
// earlier run.
func ListenUnix(path string) (net.Listener, error) {
	path = strings.TrimPrefix(path, "unix://")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("health socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale health socket: %w", err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("health socket: %w", err)
	}
	return lis, nil
}

// Serve serves the health service on lis until ctx is done, then stops the
// server (closing lis, which removes a unix socket) and returns nil.
func (c *Checker) Serve(ctx context.Context, lis net.Listener) error {
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, c.Server())
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(lis) }()
	select {
	case <-ctx.Done():
		gs.Stop()
		<-errc
		return nil
	case err := <-errc:
		return fmt.Errorf("health server: %w", err)
	}
}

// ServeUnix is ListenUnix followed by Serve. Use ListenUnix and Serve to learn
// of a listen failure before serving in the background.
func (c *Checker) ServeUnix(ctx context.Context, path string) error {
	lis, err := ListenUnix(path)
	if err != nil {
		return err
	}
	return c.Serve(ctx, lis)
}

// IdleGrace is how long ReportConnState lets a connection sit idle before
// it asks it to connect.
const IdleGrace = 3 * time.Second

// ReportConnState reports the state of a gRPC client connection as the
// health of subservice until ctx is done or the connection is closed:
// SERVING exactly while the connection is Ready. A connection left idle for IdleGrace is asked to
// connect, so that an unused connection still reports its peer's health.
// Its outages are logged once each (see connLog), so that a peer that is
// down or mistyped is seen while it matters, not at the first call's end.
func (c *Checker) ReportConnState(ctx context.Context, conn *grpc.ClientConn, subservice string) {
	out := connLog{log: c.log.With("subservice", subservice, "target", conn.Target())}
	for {
		st := conn.GetState()
		c.SetServing(subservice, st == connectivity.Ready)
		out.observe(ctx, conn, st)
		switch st {
		case connectivity.Shutdown:
			return
		case connectivity.Idle:
			wctx, cancel := context.WithTimeout(ctx, IdleGrace)
			changed := conn.WaitForStateChange(wctx, st)
			cancel()
			if !changed && ctx.Err() == nil {
				conn.Connect()
			}
		default:
			conn.WaitForStateChange(ctx, st)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// The lines of a reported connection's outage.
const (
	LogConnFailing = "gRPC connection failing; retrying with backoff"
	LogConnReady   = "gRPC connection ready again"
)

// reasonTimeout bounds the call that learns why a connection failed.
const reasonTimeout = time.Second

// connLog logs the outages of one reported connection: a warning with the
// reason when it first fails (at start or after it was ready) and a line
// when it is ready again. The retries in between are not logged: gRPC keeps
// a failed connection in TRANSIENT_FAILURE while it retries, and a state
// seen again within the same outage is not said again.
type connLog struct {
	log   *slog.Logger
	since time.Time // start of the current outage; zero when none
}

func (l *connLog) observe(ctx context.Context, conn *grpc.ClientConn, st connectivity.State) {
	switch {
	case st == connectivity.TransientFailure && l.since.IsZero():
		l.since = time.Now()
		l.log.Warn(LogConnFailing, "state", st.String(), "error", lastConnError(ctx, conn))
	case st == connectivity.Ready && !l.since.IsZero():
		l.log.Info(LogConnReady, "after", time.Since(l.since).Round(time.Millisecond).String())
		l.since = time.Time{}
	}
}

// lastConnError is why conn failed (a dial or name resolution error), as a
// fail-fast health check learns it: gRPC fails such a call at once on a
// connection in TRANSIENT_FAILURE, with the last connection error, and
// exposes that error no other way. Nothing reaches the peer then. It is
// "unknown" when the call did not fail that way (the state changed).
func lastConnError(ctx context.Context, conn *grpc.ClientConn) string {
	ctx, cancel := context.WithTimeout(ctx, reasonTimeout)
	defer cancel()
	_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(false))
	if status.Code(err) != codes.Unavailable {
		return "unknown"
	}
	return status.Convert(err).Message()
}
