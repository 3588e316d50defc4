package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
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
	healthpb.RegisterHealthServer(gs, c.srv)
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

// IdleGrace is how long MonitorConn lets a connection sit idle before it asks
// it to connect.
const IdleGrace = 3 * time.Second

// MonitorConn drives subservice from the state of a gRPC client connection
// until ctx is done or the connection is closed: SERVING exactly while the
// connection is Ready. A connection left idle for IdleGrace is asked to
// connect, so that an unused connection still reports its peer's health.
func (c *Checker) MonitorConn(ctx context.Context, conn *grpc.ClientConn, subservice string) {
	for {
		st := conn.GetState()
		c.SetServing(subservice, st == connectivity.Ready)
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
